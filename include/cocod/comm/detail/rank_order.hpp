#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/rank_order.hpp is internal: include a communicator's header"
#endif
// The deterministic all-reduce of the communicators that move host memory (comm::Threads,
// comm::Mpi): worker q sums slice q of every worker's buffer in rank order, then every worker
// gathers all slices. Both cut buffers and add them here, so that N threads and N processes give
// the same sums to the bit, whatever the timing.
#include <Eigen/Core>

#include <algorithm>
#include <cstddef>
#include <utility>

#include "cocod/detail/partition.hpp"

namespace cocod::comm::detail {

/// Worker q's slice of a buffer of n elements among `workers`: [q n / N, (q + 1) n / N), the
/// library's one partition (cocod/detail/partition.hpp).
[[nodiscard]] inline std::pair<std::size_t, std::size_t> slice(std::size_t q, std::size_t n,
                                                               std::size_t workers) noexcept {
  return cocod::detail::part(q, n, workers);
}

/// out[i] = (part(0)[i] + part(1)[i]) + part(2)[i] ... for i < len: the `parts` buffers summed
/// in rank order (part(q) points at worker q's first element of the slice). The order is fixed,
/// so the result is bitwise reproducible; cache-sized blocks, vectorized. `out` must not overlap
/// the parts.
template <class T, class Part>
void sum_in_rank_order(T* out, std::size_t len, std::size_t parts, Part&& part) {
  using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
  constexpr std::size_t block = 4096;
  for (std::size_t b = 0; b < len; b += block) {
    const auto n = static_cast<Eigen::Index>(std::min(block, len - b));
    Eigen::Map<Vec> sum(out + b, n);
    sum = Eigen::Map<const Vec>(part(0) + b, n);
    for (std::size_t q = 1; q < parts; ++q) sum += Eigen::Map<const Vec>(part(q) + b, n);
  }
}

}  // namespace cocod::comm::detail
