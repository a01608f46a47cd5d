#pragma once
// Backend tags: empty types that select a backend's kernels and buffers at compile time.

namespace cocod::backend {

/// The host backend: Eigen maps and expressions over host memory.
struct cpu {};

/// The device backend: Thrust over the memory of Thrust's device system (CUDA on a GPU; the
/// OMP or CPP device system runs the same code on the host, which is how it is tested without
/// a GPU). Its headers are in backend/cuda/ and need <cocod/backend/cuda.hpp>.
struct cuda {};

}  // namespace cocod::backend
