#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/mpi/stall.hpp is internal: include <cocod/comm/mpi.hpp>"
#endif
// comm::Mpi's stall timer (MpiOptions::stall_timeout): waiting for MPI requests either in MPI's
// own wait, which cannot time out, or by MPI_Test until a deadline, past which the caller's
// stall handler throws. Half way there it tells MpiOptions::stall_suspected, once per wait.
#include <mpi.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>

#include "cocod/comm/communicator.hpp"
#include "cocod/comm/detail/mpi/environment.hpp"

namespace cocod::comm::mpi_detail {

/// "2 s", "0.5 s".
[[nodiscard]] inline std::string seconds_text(std::chrono::milliseconds t) {
  if (t.count() % 1000 == 0) return std::to_string(t.count() / 1000) + " s";
  std::string s = std::to_string(static_cast<double>(t.count()) / 1000.0);
  while (s.back() == '0') s.pop_back();
  return s + " s";
}

class StallTimer {
 public:
  explicit StallTimer(std::chrono::milliseconds timeout, std::function<void(const std::string&)> suspected = {}, int rank = 0)
      : timeout_(timeout), suspected_(std::move(suspected)), rank_(rank) {}

  /// A collective that makes no progress this long is a stall (zero or less: no timer).
  [[nodiscard]] bool on() const noexcept { return timeout_.count() > 0; }
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }

  /// Whether the n requests completed: tested once, or with `block` until they have; past the
  /// timeout since `since`, stall() (which throws). Without a timer, a blocking wait is MPI_Waitall.
  template <class Stall>
  bool wait_all(MPI_Request* requests, int n, bool block, Clock::time_point since, Stall&& stall) const {
    if (block && !on()) {
      check(MPI_Waitall(n, requests, MPI_STATUSES_IGNORE), "MPI_Waitall");
      return true;
    }
    for (;;) {
      int flag = 0;
      check(MPI_Testall(n, requests, &flag, MPI_STATUSES_IGNORE), "MPI_Testall");
      if (flag) return true;
      const auto waited = Clock::now() - since;
      if (on() && waited >= timeout_) stall();
      if (on() && suspected_ && waited >= timeout_ / 2 && since != told_) {
        told_ = since;
        try {  // (a failure here would fail the collective on this rank alone)
          suspected_("cocod::comm::Mpi: rank " + std::to_string(rank_) + ": a collective has made no progress for " +
                     seconds_text(std::chrono::duration_cast<std::chrono::milliseconds>(timeout_ / 2)) + ", half the stall timeout (" +
                     seconds_text(timeout_) + ")");
        } catch (...) {
        }
      }
      if (!block) return false;
    }
  }

 private:
  std::chrono::milliseconds timeout_;
  std::function<void(const std::string&)> suspected_;
  int rank_;
  mutable Clock::time_point told_{};  // the start of the wait last told of
};

}  // namespace cocod::comm::mpi_detail
