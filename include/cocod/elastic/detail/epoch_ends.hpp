#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/elastic/detail/epoch_ends.hpp is internal: include <cocod/elastic/train.hpp>"
#endif
// What an elastic worker does between two membership epochs: time each phase of the next one's
// start, and close the last one's communicator on a thread of its own.
#include <chrono>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "cocod/comm/gloo.hpp"

namespace cocod::elastic::detail {

/// The seconds since the last call (the phases of EpochStart, one after the other).
class Lap {
 public:
  double operator()() {
    const auto now = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(now - std::exchange(last_, now)).count();
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

/// The communicators of ended epochs, closed on a thread of their own: Gloo's TCP transport
/// takes a tick of its event loop (10 ms) for each connection it closes, 20-30 ms for 3 peers,
/// which the next epoch's start need not wait for. One at a time; the last is joined on
/// destruction (a process does not end while one closes).
class Retired {
 public:
  Retired() = default;
  Retired(const Retired&) = delete;
  Retired& operator=(const Retired&) = delete;
  ~Retired() { join(); }

  /// Closes `comm` (this worker's last handle of it: the trainer's are gone) on the thread;
  /// where no thread can be started, here.
  void add(std::optional<comm::Gloo>& comm) {
    if (!comm) return;
    join();
    try {
      thread_ = std::thread([held = std::move(comm)]() mutable { held.reset(); });
    } catch (const std::system_error&) {
    }
    comm.reset();
  }

 private:
  void join() noexcept {
    if (thread_.joinable()) thread_.join();
  }
  std::thread thread_;
};

}  // namespace cocod::elastic::detail
