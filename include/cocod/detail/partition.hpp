#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/detail/partition.hpp is internal: include <cocod.hpp>"
#endif
// The one way cocod cuts n elements into P contiguous parts: part q is [q n / P, (q + 1) n / P).
// Fragments of the model (Fragments::count) and the slices that each worker sums in a rank-
// ordered all-reduce (comm::Threads, comm::Mpi) are cut so. A compressed exchange's owner
// slices are the one exception, for a reason: its all-to-all needs blocks of one size, so they
// are ceil(n / N) long and the last ones are padded (algorithm/detail/compressed.hpp).
#include <cstddef>
#include <utility>

namespace cocod::detail {

/// [begin, end) of part q of n elements cut into `parts`; the parts differ in length by at most 1.
[[nodiscard]] constexpr std::pair<std::size_t, std::size_t> part(std::size_t q, std::size_t n, std::size_t parts) noexcept {
  return {q * n / parts, (q + 1) * n / parts};
}

}  // namespace cocod::detail
