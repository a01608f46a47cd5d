#pragma once
// Backend tags: empty types that select a backend's kernels and buffers at compile time, and the
// annotation of the element functors that every backend runs (on a GPU: host and device code).

namespace cocod::backend {

/// The host backend: Eigen maps and expressions over host memory.
struct cpu {};

/// The device backend: Thrust over the memory of Thrust's device system (CUDA on a GPU; the
/// OMP or CPP device system runs the same code on the host, which is how it is tested without
/// a GPU). Its headers are in backend/cuda/ and need <cocod/backend/cuda.hpp>.
struct cuda {};

}  // namespace cocod::backend

/// Marks an element functor's call operator as code for the host and the device, so that one
/// functor serves every backend's for_each_index (nothing outside nvcc).
#if !defined(COCOD_HOST_DEVICE)
#if defined(__CUDACC__)
#define COCOD_HOST_DEVICE __host__ __device__
#else
#define COCOD_HOST_DEVICE
#endif
#endif
