#pragma once
// Backend tags: empty types that select a backend's kernels and buffers at compile time.

namespace cocod::backend {

/// The host backend: Eigen maps and expressions over host memory.
struct cpu {};

}  // namespace cocod::backend
