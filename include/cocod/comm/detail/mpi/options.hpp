#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/mpi/options.hpp is internal: include <cocod/comm/mpi.hpp>"
#endif
// The settings of comm::Mpi: which progress design, how often the polling thread looks,
// whether sums are taken in rank order, and how long a collective may wait for a rank.
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>

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
  /// true: sums are taken in rank order (each rank sums its slice of every rank's buffer, chunk
  /// by chunk, and sends the sums on as they are made: point-to-point messages, rank_ordered.hpp),
  /// bitwise identical to comm::Threads with as many workers. false: the MPI library's own
  /// MPI_Iallreduce, whose order of summation it chooses.
  bool deterministic = true;
  /// A collective that makes no progress for this long (a rank stopped, hangs, or computes far
  /// longer than its peers between two collectives) throws cocod::Aborted on every rank that
  /// waits, naming the ranks that have not begun it when that is known: the last resort against
  /// a job that would wait forever. MPI cannot cancel a collective, so the job must then end
  /// (Mpi::run aborts it). Zero or negative turns the check off; then blocking collectives use
  /// MPI's blocking calls and waits use MPI_Wait, which cannot time out.
  std::chrono::milliseconds stall_timeout = std::chrono::seconds(300);
  /// Told once per wait (a collective's description exchange, or its data) that has made no
  /// progress for half the stall_timeout, with a line that says so ("cocod::comm::Mpi: rank 0:
  /// a collective has made no progress for 1 s, half the stall timeout (2 s)"), from the thread
  /// that waits, which may hold the communicator's lock: it must not use the communicator, and
  /// what it throws is ignored. Empty: nobody is told.
  std::function<void(const std::string&)> stall_suspected{};
};

[[nodiscard]] inline const char* to_string(MpiProgress p) noexcept {
  switch (p) {
    case MpiProgress::polling_thread: return "polling_thread";
    case MpiProgress::blocking_thread: return "blocking_thread";
    case MpiProgress::caller: return "caller";
  }
  return "?";
}

namespace mpi_detail {

/// Throws std::invalid_argument naming the field when comm::Mpi cannot use `o`.
inline void check_options(const MpiOptions& o) {
  const auto us = [](std::chrono::microseconds t) { return std::to_string(t.count()) + " us"; };
  // The polling thread sleeps at least poll_min between two polls: with 0 it would poll without
  // pause and take a whole core from the computation. The other designs do not sleep.
  if (o.progress == MpiProgress::polling_thread && o.poll_min < std::chrono::microseconds(1))
    throw std::invalid_argument(
        "cocod::comm::MpiOptions: poll_min must be >= 1 us for MpiProgress::polling_thread, whose shortest "
        "sleep between two polls it is (0 would poll without pause, taking a core) (got " +
        us(o.poll_min) + ")");
  if (o.poll_min < std::chrono::microseconds(0))
    throw std::invalid_argument("cocod::comm::MpiOptions: poll_min must be >= 0 us (got " + us(o.poll_min) + ")");
  if (o.poll_interval < o.poll_min)
    throw std::invalid_argument("cocod::comm::MpiOptions: poll_min must be <= poll_interval (got poll_min " +
                                us(o.poll_min) + ", poll_interval " + us(o.poll_interval) + ")");
}

}  // namespace mpi_detail

}  // namespace cocod::comm
