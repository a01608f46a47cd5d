#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/nccl/state.hpp is internal: include <cocod/comm/nccl.hpp>"
#endif
// What every copy of one GPU worker's Nccl shares (the NCCL communicator, its communication
// stream, a device scratch buffer for host-memory collectives), and the checks that turn a CUDA
// or NCCL error code into a cocod::NcclError.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <string>
#include <type_traits>

#include "cocod/errors.hpp"

namespace cocod::comm::nccl_detail {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw NcclError(std::string("cocod::comm::Nccl: ") + what + ": " + cudaGetErrorString(e));
}
inline void check(ncclResult_t e, const char* what) {
  if (e != ncclSuccess) throw NcclError(std::string("cocod::comm::Nccl: ") + what + ": " + ncclGetErrorString(e));
}
template <class T>
ncclDataType_t type() {
  return std::is_same_v<T, double> ? ncclDouble : ncclFloat;
}

struct Handles {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1, device = 0;
  cudaStream_t stream = nullptr;
  double* scratch = nullptr;
  std::size_t scratch_size = 0;

  bool owns_comm = true;  // false under Nccl::run, which destroys or aborts its communicators itself

  Handles(ncclComm_t c, int device_, bool owns = true) : comm(c), device(device_), owns_comm(owns) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(ncclCommUserRank(comm, &rank), "ncclCommUserRank");
    check(ncclCommCount(comm, &size), "ncclCommCount");
    // Non-blocking: the legacy default stream, where Thrust's kernels run, does not wait for it.
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
  ~Handles() {
    if (scratch) cudaFree(scratch);
    if (stream) cudaStreamDestroy(stream);
    if (comm && owns_comm) ncclCommDestroy(comm);
  }

  // The communication stream waits for everything queued so far on the compute (default) stream.
  void after_compute() const {
    cudaEvent_t ready = nullptr;
    check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(ready, cudaStreamLegacy), "cudaEventRecord");
    check(cudaStreamWaitEvent(stream, ready, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(ready);  // released once the wait has been enqueued
  }

  // A device buffer of at least `bytes` bytes, grown (never shrunk) as host collectives need.
  void* scratch_of(std::size_t bytes) {
    if (scratch_size < bytes) {
      if (scratch) cudaFree(scratch);
      scratch = nullptr;
      scratch_size = 0;
      check(cudaMalloc(reinterpret_cast<void**>(&scratch), bytes), "cudaMalloc");
      scratch_size = bytes;
    }
    return scratch;
  }
};

}  // namespace cocod::comm::nccl_detail
