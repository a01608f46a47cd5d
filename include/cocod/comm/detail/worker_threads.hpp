#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/worker_threads.hpp is internal: include a communicator's header"
#endif
// The run() of the communicators whose workers are threads of one process (comm::Threads,
// comm::Nccl): one thread per rank, and one rule for which failure the caller sees.
#include <cstddef>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "cocod/comm/detail/thread_start.hpp"
#include "cocod/errors.hpp"

namespace cocod::comm::detail {

/// Runs body(r) on `workers` threads, rank r on thread r, and returns when all are done.
/// When a worker throws, abort(reason) runs on its thread so that the collectives the others
/// wait in fail (with cocod::Aborted) instead of hanging; leave(r) runs when worker r is done,
/// whether it returned or threw. Then the failure that caused the others is rethrown: the
/// exception of the lowest rank that did not end with cocod::Aborted, whatever the order in which
/// the workers failed; only if every failure is an Aborted, the lowest rank's. abort and leave
/// are called from the workers' threads, possibly at the same time. If the thread of a rank
/// cannot be started (start(f) throws), abort and leave(r) for the ranks not started run on the
/// caller's thread, the started workers are joined, and the failure is rethrown (as a
/// std::system_error naming the worker when it was one).
template <class Body, class Abort, class Leave, class Start = StartThread>
void run_workers(int workers, Body&& body, Abort&& abort, Leave&& leave, Start&& start = {}) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
  std::vector<char> aborted(static_cast<std::size_t>(workers), 0);  // not vector<bool>: written from several threads
  auto worker = [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    try {
      body(r);
    } catch (const Aborted&) {
      errors[i] = std::current_exception();
      aborted[i] = 1;
      abort("worker " + std::to_string(r) + " stopped");
    } catch (const std::exception& e) {
      errors[i] = std::current_exception();
      abort("worker " + std::to_string(r) + " failed: " + e.what());
    } catch (...) {
      errors[i] = std::current_exception();
      abort("worker " + std::to_string(r) + " failed");
    }
    leave(r);
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(workers));
  for (int r = 0; r < workers; ++r) {
    try {
      threads.push_back(start([&worker, r] { worker(r); }));
    } catch (...) {
      // The workers already running may wait in a collective for rank r, which never comes.
      abort("worker " + std::to_string(r) + " could not be started");
      for (int q = r; q < workers; ++q) leave(q);
      for (auto& t : threads) t.join();
      rethrow_start_failure("cocod::comm: the thread of worker " + std::to_string(r) + " of " +
                            std::to_string(workers) + " could not be started");
    }
  }
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < errors.size(); ++i)
    if (errors[i] && !aborted[i]) std::rethrow_exception(errors[i]);
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace cocod::comm::detail
