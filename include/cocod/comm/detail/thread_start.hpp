#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/thread_start.hpp is internal: include a communicator's header"
#endif
// How the communicators start their threads. Starting one can fail (std::thread throws
// std::system_error, EAGAIN once the process has reached its limit of threads); the caller must
// then stop and join the threads it already started before the exception leaves, since a
// joinable std::thread destroyed by the unwinding calls std::terminate. The way to start a
// thread is a parameter, so that tests can make the n-th start fail.
#include <string>
#include <system_error>
#include <thread>
#include <utility>

namespace cocod::comm::detail {

/// Starts a std::thread running f.
struct StartThread {
  template <class F>
  std::thread operator()(F&& f) const {
    return std::thread(std::forward<F>(f));
  }
};

/// Inside a catch block around a thread start: rethrows the exception, a std::system_error as
/// one with its code and `what` before the system's message ("<what>: Resource temporarily
/// unavailable"), anything else unchanged.
[[noreturn]] inline void rethrow_start_failure(const std::string& what) {
  try {
    throw;
  } catch (const std::system_error& e) {
    throw std::system_error(e.code(), what);
  }
}

}  // namespace cocod::comm::detail
