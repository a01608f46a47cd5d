#pragma once
// One worker: every collective is the identity and completes at once.
#include <span>
#include <stdexcept>
#include <string>

#include "cocod/comm/communicator.hpp"
#include "cocod/model/concepts.hpp"

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
  template <Scalar T>
  void broadcast(std::span<T>, int root) const {
    if (root != 0)
      throw std::invalid_argument("cocod::comm::Local::broadcast: root must be 0 (got " +
                                  std::to_string(root) + ")");
  }
  template <Scalar T>
  void all_reduce(std::span<T>) const noexcept {}
  template <Scalar T>
  [[nodiscard]] Request all_reduce_async(std::span<T>) const noexcept {
    return Request{};
  }
};

}  // namespace cocod::comm
