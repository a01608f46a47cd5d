#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/agreement.hpp is internal: include <cocod.hpp>"
#endif
// What the workers agree on before anything large moves: every worker's parameter count, shard
// size and batch size, gathered in one small all-reduce, so that a mismatch raises the same
// error on every worker and names the workers that differ.
#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "cocod/errors.hpp"

namespace cocod::detail {

/// The sums every worker computes alike.
struct Agreed {
  std::size_t total_batch = 0;  ///< sum_j M_j
  double total_samples = 0.0;   ///< sum_j n_j
};

/// Gathers (parameters, samples, batch_size) of every worker; throws DistributedError on every
/// worker when the parameter counts differ or a shard is empty. Sums in double, so batch and
/// shard sizes stay exact whatever the model's scalar.
template <class Comm>
Agreed agree(Comm& comm, std::size_t parameters, std::size_t samples, std::size_t batch_size) {
  const auto rank = static_cast<std::size_t>(comm.rank());
  const auto n = static_cast<std::size_t>(comm.size());
  std::vector<double> all(3 * n, 0.0);  // [parameters_j..., samples_j..., batch_size_j...]
  all[rank] = static_cast<double>(parameters);
  all[n + rank] = static_cast<double>(samples);
  all[2 * n + rank] = static_cast<double>(batch_size);
  comm.all_reduce(std::span<double>(all));
  auto count = [](double v) { return std::to_string(static_cast<std::size_t>(v)); };

  std::string differ;
  std::size_t differing = 0;
  for (std::size_t j = 1; j < n; ++j) {
    if (all[j] == all[0]) continue;
    if (++differing <= 8) differ += "; rank " + std::to_string(j) + " has " + count(all[j]);
  }
  if (differing > 8) differ += "; and " + std::to_string(differing - 8) + " more";
  if (differing > 0)
    throw DistributedError("cocod: the parameter count differs between workers: rank 0 has " + count(all[0]) +
                           differ);

  Agreed agreed;
  std::size_t empty = 0;
  for (std::size_t j = 0; j < n; ++j) {
    empty += all[n + j] == 0.0 ? 1 : 0;
    agreed.total_samples += all[n + j];
    agreed.total_batch += static_cast<std::size_t>(all[2 * n + j]);
  }
  if (empty > 0)
    throw DistributedError("cocod: " + std::to_string(empty) +
                           " worker(s) have an empty shard (num_samples() == 0); this worker (rank " +
                           std::to_string(rank) + ") has " + std::to_string(samples) + " samples");
  return agreed;
}

}  // namespace cocod::detail
