#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/nccl/request.hpp is internal: include <cocod/comm/nccl.hpp>"
#endif
// The request of a collective posted on a worker's communication stream: a CUDA event recorded
// after it. Waiting synchronizes on the event; dropping the request waits too, so that a buffer
// is never released while its collective still runs.
#include <cuda_runtime.h>

#include <utility>

#include "cocod/comm/communicator.hpp"
#include "cocod/comm/detail/nccl/state.hpp"

namespace cocod::comm::nccl_detail {

class Request {
 public:
  Request() = default;
  Request(Request&& o) noexcept : event_(std::exchange(o.event_, nullptr)), done_(o.done_) {}
  Request& operator=(Request&& o) noexcept {
    if (this != &o) {
      release();
      event_ = std::exchange(o.event_, nullptr);
      done_ = o.done_;
    }
    return *this;
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() { release(); }

  /// The request of what was just queued on `stream`.
  [[nodiscard]] static Request recorded_on(cudaStream_t stream) {
    cudaEvent_t done = nullptr;
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming | cudaEventBlockingSync), "cudaEventCreate");
    if (const cudaError_t e = cudaEventRecord(done, stream); e != cudaSuccess) {
      cudaEventDestroy(done);
      check(e, "cudaEventRecord");
    }
    Request r;
    r.event_ = done;
    return r;
  }
  /// A request already complete: it completed now (not at the clock's epoch).
  [[nodiscard]] static Request completed_now() {
    Request r;
    r.done_ = Clock::now();
    return r;
  }

  void wait() {
    if (!event_) return;
    check(cudaEventSynchronize(event_), "cudaEventSynchronize");
    done_ = Clock::now();
    cudaEventDestroy(event_);
    event_ = nullptr;
  }
  [[nodiscard]] Clock::time_point completed_at() const noexcept { return done_; }
  /// Whether the collective completed on the device (cudaEventQuery), so that wait() returns
  /// at once. Never blocks, never throws; a CUDA error counts as ready (wait() reports it).
  [[nodiscard]] bool ready() const noexcept { return !event_ || cudaEventQuery(event_) != cudaErrorNotReady; }

 private:
  void release() noexcept {
    if (event_) {
      cudaEventSynchronize(event_);  // never let the buffer go while the all-reduce runs
      cudaEventDestroy(event_);
      event_ = nullptr;
    }
  }
  cudaEvent_t event_ = nullptr;
  Clock::time_point done_{};
};

}  // namespace cocod::comm::nccl_detail
