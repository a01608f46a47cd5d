#pragma once
// One worker: every collective is the identity and completes at once.
#include <span>
#include <stdexcept>
#include <string>

#include "cocod/comm/communicator.hpp"

namespace cocod::comm {

/// The communicator of a single worker (rank 0 of 1).
class Local {
 public:
  struct Request {
    Clock::time_point done = Clock::now();
    void wait() const noexcept {}
    [[nodiscard]] Clock::time_point completed_at() const noexcept { return done; }
  };

  [[nodiscard]] int rank() const noexcept { return 0; }
  [[nodiscard]] int size() const noexcept { return 1; }
  // Every span type (std::span, device_span): with one worker nothing moves.
  template <class Span>
  void broadcast(Span, int root) const {
    if (root != 0)
      throw std::invalid_argument("cocod::comm::Local::broadcast: root must be 0 (got " +
                                  std::to_string(root) + ")");
  }
  template <class Span>
  void all_reduce(Span) const noexcept {}
  template <class Span>
  [[nodiscard]] Request all_reduce_async(Span) const noexcept {
    return Request{};
  }
};

}  // namespace cocod::comm
