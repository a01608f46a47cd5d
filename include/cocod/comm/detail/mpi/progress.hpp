#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/mpi/progress.hpp is internal: include <cocod/comm/mpi.hpp>"
#endif
// Who advances comm::Mpi's posted collectives, by MpiOptions::progress: a communication thread
// that polls MPI_Test with a growing pause (polling_thread) or waits in MPI_Wait
// (blocking_thread), or the worker itself between its steps and in wait() (caller).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <thread>

#include "cocod/comm/communicator.hpp"
#include "cocod/comm/detail/mpi/collectives.hpp"
#include "cocod/comm/detail/collective_queue.hpp"
#include "cocod/comm/detail/mpi/options.hpp"
#include "cocod/comm/detail/thread_start.hpp"
#include "cocod/comm/detail/ticket_ring.hpp"
#include "cocod/errors.hpp"

namespace cocod::comm::mpi_detail {

/// The state every copy of one comm::Mpi shares: the duplicated communicator, the queue of
/// collectives (a fixed ring: posting allocates nothing) and the progress engine.
class Engine {
  using Queue = comm::detail::CollectiveQueue<Operation>;
  using Lock = Queue::Lock;
  using Ring = Queue::Ring;

 public:
  Engine(MPI_Comm comm, MpiOptions options) : options_(options), collectives_(comm, options) {
    if (caller()) return;
    try {
      thread_ = std::thread([this] { serve(); });
    } catch (...) {  // nothing else was started; the members free the duplicated communicator
      comm::detail::rethrow_start_failure("cocod::comm::Mpi: the communication thread could not be started");
    }
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  /// Tells the peers that this rank calls no more collectives here (see depart()); a peer that
  /// still calls one raises DistributedError, and this rank reports the mismatch on stderr. A
  /// collective that stalled cannot be cancelled, so the process could never finalize MPI: then
  /// the job ends here (MPI_Abort) with the reason.
  ~Engine() {
    try {
      depart();
    } catch (const Aborted& e) {
      abort_job(e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cocod: rank %d: %s\n", rank(), e.what());
      std::fflush(stderr);
    }
    queue_.close();
    if (thread_.joinable()) thread_.join();
    if (collectives_.stalled())
      abort_job("cocod::comm::Mpi: " + collectives_.failure() + " (MPI cannot cancel the stalled collective: ending the job)");
  }

  [[nodiscard]] int rank() const noexcept { return collectives_.rank(); }
  [[nodiscard]] int size() const noexcept { return collectives_.size(); }
  [[nodiscard]] MPI_Comm handle() const noexcept { return collectives_.handle(); }
  [[nodiscard]] const MpiOptions& options() const noexcept { return options_; }

  std::uint64_t post(const Operation& op) {
    if (caller()) {
      return queue_.locked([&](Lock&, Ring& ring) {
        // No thread may drain the ring for us: make room by completing the oldest ourselves.
        while (ring.full()) complete_head(ring);
        const std::uint64_t ticket = ring.push(op);
        if (ticket == ring.head_ticket()) advance_head(ring, false);
        return ticket;
      });
    }
    return queue_.post(op, "cocod::comm::Mpi", [&](Ring& ring) {
      // The descriptions go out now, from this thread (the communication thread is idle: the ring
      // was empty, and it waits for the lock we hold): by the time that thread first polls, the
      // peers' have usually arrived, and no poll's sleep is spent on them.
      if (ring.posted != ring.head_ticket() + 1) return;
      try {
        collectives_.start(ring.head());
      } catch (...) {
        ring.retire(std::current_exception());
      }
    });
  }

  /// A blocking collective, run by MPI's blocking collectives in the calling thread (no hand-off
  /// to the communication thread and back, which costs tens of microseconds) once every posted
  /// one has completed. Always so, whatever is in flight: MPI never matches a blocking collective
  /// with a non-blocking one, so every rank must issue the same kind for the same collective,
  /// and whether an earlier one is still in flight differs between ranks. Rethrows its failure.
  void run(const Operation& op) {
    queue_.locked([&](Lock& lock, Ring& ring) {
      if (caller()) {
        while (ring.pending()) complete_head(ring);
      } else {
        lock.unlock();
        queue_.drain();
        lock.lock();
      }
      // The communication thread waits for work, and for the lock we hold.
      Operation job = op;
      collectives_.run_blocking(job);
    });
  }

  /// Blocks until the ticket's collective completed; rethrows its failure.
  Clock::time_point wait(std::uint64_t ticket) {
    if (!caller()) return queue_.wait(ticket);
    return queue_.locked([&](Lock&, Ring& ring) {
      while (!ring.done(ticket)) complete_head(ring);
      if (ring.pending()) advance_head(ring, false);  // start the next one now (Pipe-SGD)
      return ring.result(ticket);
    });
  }

  /// Whether the ticket's collective completed (wait() then returns at once). Never blocks on the
  /// collective, never throws: under MpiProgress::caller it first advances what is in flight as
  /// progress() does (one MPI_Test per stage). A lock that fails counts as ready, so that wait()
  /// reports the failure.
  bool ready(std::uint64_t ticket) noexcept {
    if (!caller()) return queue_.ready(ticket);
    try {
      return queue_.locked([&](Lock&, Ring& ring) {
        if (!ring.done(ticket)) advance_ready(ring);
        return ring.done(ticket);
      });
    } catch (...) {
      return true;
    }
  }

  /// This rank calls no more collectives here: once those posted have completed, a last
  /// exchange with every peer. Throws DistributedError if a peer calls a collective instead
  /// (that peer raises it too), cocod::Aborted after the stall timeout. Once only.
  void depart() {
    if (!caller()) queue_.drain();
    queue_.locked([&](Lock&, Ring& ring) {
      while (ring.pending()) complete_head(ring);
      collectives_.depart();
    });
  }

  /// MpiProgress::caller: one MPI_Test on the oldest collective (and start the next when it
  /// completes). Cheap when nothing is in flight; a no-op for the thread designs.
  void progress() {
    if (!caller()) return;
    queue_.locked([&](Lock&, Ring& ring) { advance_ready(ring); });
  }

 private:
  [[nodiscard]] bool caller() const noexcept { return options_.progress == MpiProgress::caller; }

  // Advances the oldest collective; true when it completed (and was retired).
  bool advance_head(Ring& ring, bool block) {
    try {
      if (!collectives_.advance(ring.head(), block)) return false;
      ring.retire();
    } catch (...) {
      ring.retire(std::current_exception());
    }
    queue_.notify();
    return true;
  }
  // Advances the collectives in flight, oldest first, as far as they go without waiting.
  void advance_ready(Ring& ring) {
    while (ring.pending() && advance_head(ring, false)) {
    }
  }
  void complete_head(Ring& ring) {
    while (!advance_head(ring, true)) {
    }
  }

  // The communication thread: advances the oldest collective until it completes, polling
  // MPI_Test with a growing pause (polling_thread) or waiting in MPI_Wait (blocking_thread).
  void serve() {
    const bool block = options_.progress == MpiProgress::blocking_thread;
    queue_.serve([&](Operation& op) {
      auto pause = options_.poll_min;
      for (;;) {
        const int stage = op.stage;
        if (collectives_.advance(op, block)) return;
        if (op.stage != stage) pause = options_.poll_min;  // a new stage starts fast again
        // Keep sleeping while a worker waits, too: polling without pause takes the core from
        // other ranks' compute on a busy machine (measured: CoCoD-SGD's MPI round 36.0 ms with,
        // 33.8 ms without; docs/benchmarks.md).
        std::this_thread::sleep_for(pause);
        pause = std::min(2 * pause, options_.poll_interval);
      }
    });
  }

  MpiOptions options_;
  Collectives collectives_;
  Queue queue_;
  std::thread thread_;
};

}  // namespace cocod::comm::mpi_detail
