#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/collective_queue.hpp is internal: include a communicator's header"
#endif
// The queue of collectives that comm::Threads and comm::Mpi share: a worker posts, a server (a
// communication thread, or the worker itself under MpiProgress::caller) runs them in posting
// order, and a ticket says when each completed and whether it failed. The mutex guards every
// member; the server runs a collective unlocked, since its slot is not reused before it retires.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <utility>

#include "cocod/comm/communicator.hpp"
#include "cocod/comm/detail/ticket_ring.hpp"
#include "cocod/errors.hpp"

namespace cocod::comm::detail {

template <class Job>
class CollectiveQueue {
 public:
  using Lock = std::unique_lock<std::mutex>;
  using Ring = TicketRing<Job>;

  /// Queues a job once the ring has room (a server drains it); returns its ticket. `posted(ring)`
  /// runs under the lock right after (a job at the head may start there). After close(): Aborted.
  template <class Posted>
  std::uint64_t post(const Job& job, const char* who, Posted&& posted) {
    Lock lock(mutex_);
    cv_.wait(lock, [&] { return !ring_.full() || closing_; });
    if (closing_) throw Aborted(std::string(who) + ": the worker group has finished");
    const std::uint64_t ticket = ring_.push(job);
    posted(ring_);
    cv_.notify_all();
    return ticket;
  }
  std::uint64_t post(const Job& job, const char* who) {
    return post(job, who, [](Ring&) {});
  }

  /// Blocks until the ticket's collective completed; rethrows its failure.
  Clock::time_point wait(std::uint64_t ticket) {
    Lock lock(mutex_);
    cv_.wait(lock, [&] { return ring_.done(ticket); });
    return ring_.result(ticket);
  }
  /// Blocks until every posted collective completed.
  void drain() {
    Lock lock(mutex_);
    cv_.wait(lock, [&] { return !ring_.pending(); });
  }
  /// Whether the ticket's collective completed. A lock that fails counts as ready, so that
  /// wait() reports the failure.
  bool ready(std::uint64_t ticket) noexcept {
    try {
      std::lock_guard lock(mutex_);
      return ring_.done(ticket);
    } catch (...) {
      return true;
    }
  }
  /// f(lock, ring) under the lock, for a worker that runs the collectives itself: it may retire
  /// them (then notify()) and block on them, the lock held.
  template <class F>
  decltype(auto) locked(F&& f) {
    Lock lock(mutex_);
    return f(lock, ring_);
  }
  /// Wakes whoever waits for a ticket (after a retire under locked()).
  void notify() noexcept { cv_.notify_all(); }

  /// The server's loop: runs run(job) on each posted job in order, unlocked, and retires it with
  /// its failure if it threw; returns once close() was called and every job is done.
  template <class Run>
  void serve(Run&& run) {
    for (;;) {
      Job* job = nullptr;
      {
        Lock lock(mutex_);
        cv_.wait(lock, [&] { return ring_.pending() || closing_; });
        if (!ring_.pending()) return;  // closing and drained
        job = &ring_.head();
      }
      std::exception_ptr error;
      try {
        run(*job);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard lock(mutex_);
      ring_.retire(error);
      cv_.notify_all();
    }
  }
  /// No job is posted any more: the server finishes the queue and returns.
  void close() {
    std::lock_guard lock(mutex_);
    closing_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  Ring ring_;
  bool closing_ = false;
};

}  // namespace cocod::comm::detail
