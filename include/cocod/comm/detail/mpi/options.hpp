#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/mpi/options.hpp is internal: include <cocod/comm/mpi.hpp>"
#endif
// The settings of comm::Mpi: which progress design, how often the polling thread looks, and
// whether sums are taken in rank order.
#include <chrono>

namespace cocod::comm {

/// How comm::Mpi makes a posted collective advance while the worker computes.
enum class MpiProgress { polling_thread, blocking_thread, caller };

/// Settings of comm::Mpi.
struct MpiOptions {
  MpiProgress progress = MpiProgress::polling_thread;
  /// The polling thread sleeps between two MPI_Test calls, first `poll_min`, then twice as long
  /// after every poll that found the stage unfinished, up to `poll_interval`: small collectives
  /// are noticed within microseconds, long transfers cost few wake-ups (docs/mpi.md).
  std::chrono::microseconds poll_interval{500};
  std::chrono::microseconds poll_min{20};
  /// true: sums are taken in rank order (reduce-scatter by MPI_Ialltoallv, then
  /// MPI_Iallgatherv), bitwise identical to comm::Threads with as many workers. false: the MPI
  /// library's own MPI_Iallreduce, whose order of summation it chooses.
  bool deterministic = true;
};

[[nodiscard]] inline const char* to_string(MpiProgress p) noexcept {
  switch (p) {
    case MpiProgress::polling_thread: return "polling_thread";
    case MpiProgress::blocking_thread: return "blocking_thread";
    case MpiProgress::caller: return "caller";
  }
  return "?";
}

}  // namespace cocod::comm
