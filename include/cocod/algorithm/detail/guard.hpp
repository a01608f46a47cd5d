#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/guard.hpp is internal: include <cocod.hpp>"
#endif
// The non-finite guard (Options::non_finite): the one part that owns the policy, max_skips, the
// counts, this worker's finding and whether its contribution was withheld. Every reduction passes
// it: a worker that found a NaN or an infinity withholds its contribution (sends zeros) and flags
// itself in its slots, [what worker j found (0: nothing, 1: a loss, 2: its contribution), 1 + the
// step it found it at, the summed weights of the workers that did not], so that every worker
// learns of it from the same reduction. A partial result must be acknowledged by the algorithm
// before its step ends; the guard then raises or counts the skip as the policy says. Each
// partial result has its own ticket, so that two in one hook are acknowledged one by one.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "cocod/errors.hpp"
#include "cocod/options.hpp"

namespace cocod::detail {

class Guard {
 public:
  /// A worker that withheld its contribution from the latest reduction, and why.
  struct Withheld {
    std::size_t rank = 0;
    int what = 0;  ///< 1: a loss, 2: the contribution itself
    std::size_t step = 0;
  };

  Guard(NonFinite policy, std::size_t max_skips) : policy_(policy), max_skips_(max_skips) {}

  /// A new run of `workers` workers.
  void start(std::size_t workers) {
    workers_ = workers;
    raised_ = false;
    found_ = 0;
    skips_ = clean_ = 0;
    withheld_.clear();
    withheld_.reserve(workers);
    pending_.clear();
    own_ = false;
  }
  [[nodiscard]] bool on() const noexcept { return policy_ != NonFinite::off; }
  /// With NonFinite::skip, the skips in a row before NonFiniteError (Options::max_skips).
  [[nodiscard]] std::size_t max_skips() const noexcept { return max_skips_; }
  /// This run ended with the guard's NonFiniteError (raised on every worker at once).
  [[nodiscard]] bool raised() const noexcept { return raised_; }
  /// NonFinite::raise: a finding ends the run at the first reduction that reports it.
  [[nodiscard]] bool raises() const noexcept { return policy_ == NonFinite::raise; }
  /// Its slots per reduced buffer.
  [[nodiscard]] std::size_t slots() const noexcept { return on() ? 2 * workers_ + 1 : 0; }

  /// A step's loss: a NaN or an infinity is this worker's finding, reported by its next contribution.
  void loss(double value, std::size_t step) noexcept {
    if (on() && !std::isfinite(value)) find(1, step);
  }
  /// Checks the contribution about to be sent; true: withhold it (the caller sends zeros instead).
  template <class B, class Span>
  [[nodiscard]] bool withholds(Span contribution, std::size_t step) {
    if (!on()) return false;
    if (found_ == 0 && !all_finite(B{}, contribution)) find(2, step);
    return found_ != 0;
  }
  /// True when this worker has found a non-finite value that no reduction has reported yet.
  [[nodiscard]] bool found() const noexcept { return found_ != 0; }

  /// Writes its slots; a finding is reported once.
  template <class T>
  void write(std::span<T> g, double weight, std::size_t rank) noexcept {
    std::fill(g.begin(), g.end(), T(0));
    if (g.empty()) return;
    if (found_ != 0) {
      g[rank] = static_cast<T>(found_);
      g[workers_ + rank] = static_cast<T>((found_step_ & step_mask) + 1);  // exact in a float
      found_ = 0;
    } else {
      g[2 * workers_] = static_cast<T>(weight);
    }
  }
  /// Reads its slots after a reduction that this worker contributed to (`own`: it withheld its own).
  // The step a slot says, 1 + the step as written (0 for a value no step can have).
  template <class T>
  static std::size_t step_of(T v) noexcept {
    return v >= T(1) && v <= T(step_mask) + T(1) ? static_cast<std::size_t>(v) - 1 : 0;
  }
  template <class T>
  void read(std::span<const T> g, bool own) noexcept {
    withheld_.clear();
    kept_weight_ = 1.0;
    own_ = own;
    if (g.empty()) return;
    for (std::size_t j = 0; j < workers_; ++j)  // (a slot restored from a corrupt checkpoint may hold any value: no cast overflows)
      if (g[j] > T(0)) withheld_.push_back({j, g[j] == T(2) ? 2 : 1, step_of(g[workers_ + j])});
    // Skips count as "in a row" until two clean reductions in a row: under CoCoD-SGD a
    // worker's NaN surfaces one round after the reduction that follows its replacement.
    if (withheld_.empty()) {
      if (++clean_ >= 2) skips_ = 0;
      return;
    }
    clean_ = 0;
    kept_weight_ = static_cast<double>(g[2 * workers_]);
    pending_.push_back({++tickets_, withheld_});
  }
  /// The reduction just read lacks a withheld contribution.
  [[nodiscard]] bool partial() const noexcept { return !withheld_.empty(); }
  /// This worker's own contribution was withheld from it.
  [[nodiscard]] bool own() const noexcept { return own_; }
  /// The summed weights of the contributions it holds (1 when none was withheld).
  [[nodiscard]] double kept_weight() const noexcept { return kept_weight_; }
  /// The ticket of the partial result just read (after read(), when partial()).
  [[nodiscard]] std::size_t ticket() const noexcept { return tickets_; }
  /// A partial result that no algorithm acknowledged.
  [[nodiscard]] bool pending() const noexcept { return !pending_.empty(); }
  /// The partial result of `ticket` waits to be acknowledged.
  [[nodiscard]] bool pending(std::size_t ticket) const noexcept {
    return std::any_of(pending_.begin(), pending_.end(), [&](const Partial& p) { return p.ticket == ticket; });
  }

  /// The algorithm dealt with the partial result of `ticket` (once; again is nothing): `replaced`,
  /// this worker's state restarted from the consensus (so it forgets its finding). Then
  /// NonFinite::raise throws NonFiniteError on every worker, skip counts the skip (`skipped()`
  /// runs; NonFiniteError after max_skips in a row). `left` says where the models are left, when
  /// the default does not.
  template <class Skipped>
  void acknowledge(std::size_t ticket, bool replaced, const char* left, std::size_t round, std::size_t step, Skipped&& skipped) {
    const auto it = find_ticket(ticket);
    if (it == pending_.end()) return;
    const std::vector<Withheld> found = std::move(it->withheld);
    pending_.erase(it);
    if (replaced) found_ = 0;
    if (policy_ == NonFinite::raise)
      fail(found,
           left       ? left
           : replaced ? "the model is left at the consensus of the finite contributions"
                      : "the model is left as it was before that update",
           round, step);
    skipped();
    if (++skips_ >= max_skips_)
      fail(found, std::to_string(skips_) + " reductions in a row were skipped (Options::max_skips = " + std::to_string(max_skips_) + ")",
           round, step);
    withheld_.clear();
  }
  /// Whether restarting a worker from a partial result (`replaced`; `own`: its contribution was
  /// withheld from it) must forget its update state: its state held the NaN.
  [[nodiscard]] bool held_nan(bool replaced, bool own) const noexcept { return replaced && (own || found_ != 0); }

  /// "cocod: a NaN or an infinity in round R (step S): rank 1 had a non-finite loss at step 37,
  /// withheld from the reduction; " + `then`, as NonFiniteError, for the partial result of
  /// `ticket` (0: the first one not acknowledged, or else the latest reduction's).
  [[noreturn]] void fail(const std::string& then, std::size_t round, std::size_t step, std::size_t ticket = 0) {
    const auto it = ticket != 0 ? find_ticket(ticket) : pending_.begin();
    fail(it != pending_.end() ? it->withheld : withheld_, then, round, step);
  }

  template <class Archive>
  void serialize(Archive& a) {
    a("found", found_);
    a("found_step", found_step_);
    a("skips", skips_);
    a("clean", clean_);
  }

 private:
  static constexpr std::size_t step_mask = (std::size_t{1} << 20) - 1;
  struct Partial {
    std::size_t ticket;
    std::vector<Withheld> withheld;
  };
  [[noreturn]] void fail(const std::vector<Withheld>& found, const std::string& then, std::size_t round, std::size_t step) {
    raised_ = true;
    std::string what = "cocod: a NaN or an infinity in round " + std::to_string(round) + " (step " + std::to_string(step) + "):";
    for (const auto& w : found)
      what += " rank " + std::to_string(w.rank) + (w.what == 1 ? " had a non-finite loss" : " had a non-finite gradient or parameters") +
              " at step " + std::to_string(w.step) + ",";
    what += " withheld from the reduction; ";
    withheld_.clear();
    pending_.clear();
    throw NonFiniteError(what + then);
  }
  std::vector<Partial>::iterator find_ticket(std::size_t ticket) noexcept {
    return std::find_if(pending_.begin(), pending_.end(), [&](const Partial& p) { return p.ticket == ticket; });
  }
  void find(int what, std::size_t step) noexcept {
    if (found_ != 0) return;
    found_ = what;
    found_step_ = step;
  }

  NonFinite policy_;
  std::size_t max_skips_;
  std::size_t workers_ = 0;
  int found_ = 0;  // 1: a loss, 2: its contribution
  bool raised_ = false;
  std::size_t found_step_ = 0, skips_ = 0, clean_ = 0;
  std::vector<Withheld> withheld_;
  std::vector<Partial> pending_;  // the partial results not acknowledged yet
  std::size_t tickets_ = 0;
  double kept_weight_ = 1.0;
  bool own_ = false;
};

}  // namespace cocod::detail
