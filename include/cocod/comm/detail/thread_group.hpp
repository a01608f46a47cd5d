#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/thread_group.hpp is internal: include <cocod/comm/threads.hpp>"
#endif
// The shared state of comm::Threads: N worker threads, one communication thread per worker
// that executes that worker's collectives in posting order (a CollectiveQueue), and a barrier that
// can be aborted so that no thread is left waiting when another fails or leaves.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cocod/comm/communicator.hpp"
#include "cocod/comm/detail/collective_queue.hpp"
#include "cocod/comm/detail/rank_order.hpp"
#include "cocod/comm/detail/thread_start.hpp"
#include "cocod/comm/detail/ticket_ring.hpp"
#include "cocod/errors.hpp"

namespace cocod::comm::detail {

/// A reusable barrier for n threads that wakes every waiter with an exception when the group
/// is aborted or a member has left for good.
class AbortableBarrier {
 public:
  explicit AbortableBarrier(int n) : n_(n) {}

  void arrive_and_wait() {
    std::unique_lock lock(mutex_);
    throw_if_broken();
    const std::uint64_t generation = generation_;
    if (arrive_last()) return;
    cv_.wait(lock, [&] { return generation_ != generation || !reason_.empty() || departed_ >= 0; });
    if (generation_ != generation) return;
    throw_if_broken();
  }

  /// The barrier that ends a collective's reading of the others' buffers: it waits for all n
  /// even when the group is aborted meanwhile. Every thread that passed the collective's first
  /// barrier reaches it without waiting on anything else, so it completes; were it to throw on
  /// an abort, one worker could free a buffer (its trainer unwinding) that another still reads.
  void arrive_and_wait_all() {
    std::unique_lock lock(mutex_);
    const std::uint64_t generation = generation_;
    if (arrive_last()) return;
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

  void abort(const std::string& reason) {
    std::lock_guard lock(mutex_);
    if (reason_.empty()) reason_ = reason;
    cv_.notify_all();
  }

  /// Throws what arrive_and_wait would throw once the group is aborted or a member has left.
  void check() {
    std::lock_guard lock(mutex_);
    throw_if_broken();
  }

  /// A member will never arrive again; anyone waiting now or later fails.
  void depart(int rank) {
    std::lock_guard lock(mutex_);
    if (departed_ < 0) departed_ = rank;
    cv_.notify_all();
  }

 private:
  // Counts this thread in (the lock held); the last of the n starts the next generation and
  // wakes the others.
  bool arrive_last() {
    if (++count_ < n_) return false;
    count_ = 0;
    ++generation_;
    cv_.notify_all();
    return true;
  }
  void throw_if_broken() const {
    if (!reason_.empty()) throw Aborted("cocod::comm::Threads: collective aborted: " + reason_);
    if (departed_ >= 0)
      throw DistributedError("cocod::comm::Threads: worker " + std::to_string(departed_) +
                             " returned while this worker waits in a collective (the workers "
                             "called different sequences of collectives)");
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  int n_;
  int count_ = 0;
  int departed_ = -1;
  std::uint64_t generation_ = 0;
  std::string reason_;
};

using Job = Collective;

/// One worker's queue of collectives and the communication thread that drains it in order.
struct Channel {
  CollectiveQueue<Job> queue;
  std::thread thread;
};

class Group {
 public:
  /// Starts the communication thread of each worker with `start` (see thread_start.hpp). If one
  /// cannot be started, those already running are stopped and joined, and the failure rethrown.
  template <class Start = StartThread>
  explicit Group(int workers, Start&& start = {})
      : size_(workers),
        barrier_(workers),
        posted_(static_cast<std::size_t>(workers)),
        partial_(static_cast<std::size_t>(workers)) {
    for (int r = 0; r < workers; ++r) channels_.push_back(std::make_unique<Channel>());
    for (int r = 0; r < workers; ++r) {
      try {
        channel(r).thread = start([this, r] { serve(r); });
      } catch (...) {
        stop();  // a constructor that throws runs no destructor
        rethrow_start_failure("cocod::comm::Threads: the communication thread of worker " + std::to_string(r) +
                              " of " + std::to_string(workers) + " could not be started");
      }
    }
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  ~Group() { stop(); }

  [[nodiscard]] int size() const noexcept { return size_; }
  Channel& channel(int rank) { return *channels_[static_cast<std::size_t>(rank)]; }

  /// Queues a collective of `rank`; returns its ticket.
  std::uint64_t post(int rank, const Job& job) { return channel(rank).queue.post(job, "cocod::comm::Threads"); }

  /// Makes every pending and future collective fail (a worker threw).
  void abort(const std::string& reason) { barrier_.abort(reason); }

  /// The worker of `rank` returned: its communication thread finishes the queue, then leaves.
  void close(int rank) { channel(rank).queue.close(); }

 private:
  // Every communication thread finishes its queue and leaves; joins those that were started.
  void stop() {
    for (int r = 0; r < size_; ++r) close(r);
    for (auto& c : channels_)
      if (c->thread.joinable()) c->thread.join();
  }

  void serve(int rank) {
    channel(rank).queue.serve([&](const Job& job) {
      if (job.is_double)
        execute<double>(rank, job);
      else
        execute<float>(rank, job);
    });
    barrier_.depart(rank);
  }

  template <class T>
  void execute(int rank, const Job& job) {
    const auto r = static_cast<std::size_t>(rank);
    const auto N = static_cast<std::size_t>(size_);
    // A stopped group posts nothing more: after a mismatch (below) the others may still be
    // reading posted_ to describe it, with no barrier left to wait for them.
    barrier_.check();
    posted_[r] = job;
    barrier_.arrive_and_wait();
    // Every worker checks the same collectives against worker 0's, so every worker raises the
    // same error, naming worker 0 and the first worker that differs from it.
    const Job& first = posted_[0];
    for (std::size_t q = 1; q < N; ++q) {
      const Job& other = posted_[q];
      if (other.op != first.op || other.is_double != first.is_double || other.count != first.count ||
          other.root != first.root) {
        const std::string mismatch = "workers called mismatched collectives (worker 0: " + describe(first) + "; worker " +
                                     std::to_string(q) + ": " + describe(other) + ")";
        // The workers are out of step: each later collective would pair with another worker's
        // wrong one. The group stops, so later collectives fail with cocod::Aborted.
        barrier_.abort(mismatch);
        throw DistributedError("cocod::comm::Threads: " + mismatch);
      }
    }
    if (moves_bytes(job.op)) {
      move_bytes(r, job);
      barrier_.arrive_and_wait_all();  // every send buffer stays untouched until all have copied
      return;
    }
    T* mine = static_cast<T*>(job.data);
    if (job.op == Op::broadcast || job.op == Op::broadcast_bytes) {
      if (rank != job.root && job.count > 0)
        std::memcpy(job.data, posted_[static_cast<std::size_t>(job.root)].data, job.count * element_size(job));
      barrier_.arrive_and_wait_all();  // root's buffer stays untouched until all have copied
      return;
    }
    // All-reduce: worker q sums slice q over all workers in rank order (a fixed order, so the
    // result does not depend on thread timing), then every worker gathers all slices.
    const auto bounds = slice(r, job.count, N);
    const std::size_t lo = bounds.first, hi = bounds.second;  // (a structured binding: clang < 16 cannot capture it)
    auto& out = partial_[r];
    try {
      if (out.size() < (hi - lo) * sizeof(T)) out.resize((hi - lo) * sizeof(T));
      sum_in_rank_order(reinterpret_cast<T*>(out.data()), hi - lo, N,
                        [&](std::size_t q) { return static_cast<const T*>(posted_[q].data) + lo; });
    } catch (...) {  // (no memory for the slice): the others still finish reading before this fails
      slice_failed_ = true;
      barrier_.abort("worker " + std::to_string(rank) + "'s communication thread could not sum its slice");
      barrier_.arrive_and_wait_all();
      throw;
    }
    barrier_.arrive_and_wait_all();  // every worker's buffer stays untouched until all have summed
    if (slice_failed_) throw Aborted("cocod::comm::Threads: collective aborted: a communication thread could not sum its slice");
    for (std::size_t q = 0; q < N; ++q) {
      const auto [qlo, qhi] = slice(q, job.count, N);
      if (qhi > qlo) std::memcpy(mine + qlo, partial_[q].data(), (qhi - qlo) * sizeof(T));  // (an empty slice's buffer may be null)
    }
    // The next collective's first barrier keeps partial_ intact until everyone has copied.
  }

  // all_to_all: block q of mine comes from block r of worker q's send; all_gather: block q is
  // worker q's send. Every worker writes only its own recv buffer.
  void move_bytes(std::size_t r, const Job& job) {
    const std::size_t b = job.count;
    if (b == 0) return;
    auto* recv = static_cast<std::byte*>(job.data);
    for (std::size_t q = 0; q < posted_.size(); ++q) {
      const auto* from = static_cast<const std::byte*>(posted_[q].send) + (job.op == Op::all_to_all ? r * b : 0);
      std::byte* to = recv + q * b;
      if (from != to) std::memcpy(to, from, b);  // equal: an all_gather in place
    }
  }

  int size_;
  AbortableBarrier barrier_;
  std::vector<Job> posted_;  // each worker's current collective, read by all
  std::vector<std::vector<std::byte>> partial_;
  std::atomic<bool> slice_failed_{false};  // a thread could not sum its slice (the group is aborted for good)
  std::vector<std::unique_ptr<Channel>> channels_;
};

}  // namespace cocod::comm::detail
