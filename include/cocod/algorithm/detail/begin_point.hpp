#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/begin_point.hpp is internal: include <cocod.hpp>"
#endif
// Where a resume (from checkpoint files or an elastic snapshot) begins a trainer's run.
#include <cstddef>
#include <functional>

#include "cocod/stop.hpp"

namespace cocod::detail {

/// Where a resume begins the run: at step `step`, `progress` far through its data ({}: a fresh
/// run); `agreed`: every worker holds the same parameters (a consensus each computed in the
/// same order), so rank 0's are not broadcast again.
struct BeginPoint {
  Progress progress{};
  std::size_t step = 0;
  bool agreed = false;
};
using BeginAt = std::function<void(const BeginPoint&)>;  ///< how a resume begins the run

}  // namespace cocod::detail
