#pragma once
// What an algorithm gets back from a reduction (Operations::wait, Operations::reduce): the
// average, and whether a worker's non-finite contribution was withheld from it.
#include <cstddef>

#define COCOD_INTERNAL_INCLUDE
#include "cocod/algorithm/detail/guard.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod {

template <class Model, class Comm, class Schedule, class Update>
class Operations;

/// How an algorithm dealt with a partial reduction (Operations::acknowledge).
enum class Recovery {
  restarted,  ///< this worker's state was replaced by (restarted from) the consensus of the finite contributions
  kept,       ///< this worker kept its state: the reduction's update was skipped, or only shared state took the consensus
};

/// The result of a reduction of an exchange. When a worker withheld a non-finite contribution
/// the result is partial: the exchange's model part then holds the consensus of the finite
/// contributions (their weighted average, normalized by their weights), the same on every
/// worker, and the algorithm must acknowledge it (Operations::acknowledge) before its step ends,
/// or every worker raises NonFiniteError. Each result says what its own reduction found, so
/// that two in one hook are acknowledged one by one. Its span is the exchange's model part: it
/// holds the result until the exchange is posted or reduced again.
template <class Span>
class [[nodiscard]] Reduced {
 public:
  /// Some worker's contribution was withheld.
  [[nodiscard]] bool partial() const noexcept { return partial_; }
  /// This worker's own contribution was withheld: its state held the NaN.
  [[nodiscard]] bool withheld_here() const noexcept { return own_; }
  /// The exchange's model part: the average of every contribution, or, when partial, the
  /// consensus of the finite ones. When every contribution was withheld there is none: the same
  /// NonFiniteError on every worker.
  [[nodiscard]] Span consensus() const {
    if (partial_ && !some_kept_)
      guard_->fail("every worker's contribution was non-finite, so no finite consensus is left", round_, step_, ticket_);
    return model_;
  }

  /// (made by the run's reducer)
  Reduced(Span model, detail::Guard& guard, std::size_t round, std::size_t step) noexcept
      : model_(model),
        guard_(&guard),
        round_(round),
        step_(step),
        ticket_(guard.partial() ? guard.ticket() : 0),
        partial_(guard.partial()),
        own_(guard.own()),
        some_kept_(guard.kept_weight() > 0.0) {}

 private:
  template <class, class, class, class>
  friend class Operations;
  Span model_;
  detail::Guard* guard_;
  std::size_t round_, step_, ticket_;
  bool partial_, own_, some_kept_;
};

}  // namespace cocod
