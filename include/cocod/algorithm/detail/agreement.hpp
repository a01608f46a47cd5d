#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/agreement.hpp is internal: include <cocod.hpp>"
#endif
// What the workers agree on before anything large moves: every worker's parameter count, shard
// size, batch size and period, gathered in one small all-reduce, so that a mismatch raises the
// same error on every worker and names the workers that differ.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
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

/// Gathers (parameters, samples, batch_size, period, layout) of every worker; throws
/// DistributedError on every worker when the parameter counts, the periods (S-SGD and Pipe-SGD
/// would not notice another period otherwise: it only groups their steps into rounds) or the
/// layouts differ (a model's layout_fingerprint(), 0 without one), or a shard is empty. Sums in
/// double, so batch and shard sizes and the fingerprint's 32-bit halves stay exact.
template <class Comm>
Agreed agree(Comm& comm, std::size_t parameters, std::size_t samples, std::size_t batch_size, std::size_t period,
             std::uint64_t layout = 0) {
  const auto rank = static_cast<std::size_t>(comm.rank());
  const auto n = static_cast<std::size_t>(comm.size());
  std::vector<double> all(6 * n, 0.0);  // [parameters_j...][samples_j...][batch_size_j...][period_j...][layout: high, low]
  all[rank] = static_cast<double>(parameters);
  all[n + rank] = static_cast<double>(samples);
  all[2 * n + rank] = static_cast<double>(batch_size);
  all[3 * n + rank] = static_cast<double>(period);
  all[4 * n + rank] = static_cast<double>(layout >> 32);
  all[5 * n + rank] = static_cast<double>(layout & 0xFFFFFFFFu);
  comm.all_reduce(std::span<double>(all));
  auto fingerprint = [&](std::size_t j) {
    char b[24];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(all[4 * n + j]) << 32 | static_cast<unsigned long long>(all[5 * n + j]));
    return std::string(b);
  };
  // Workers whose value (`differs`) is not rank 0's, named with `value`: the same words on every worker.
  auto same = [&](const char* what, auto differs, auto value) {
    std::string differ;
    std::size_t differing = 0;
    for (std::size_t j = 1; j < n; ++j) {
      if (!differs(j)) continue;
      if (++differing <= 8) differ += "; rank " + std::to_string(j) + " has " + value(j);
    }
    if (differing > 8) differ += "; and " + std::to_string(differing - 8) + " more";
    if (differing > 0)
      throw DistributedError(std::string("cocod: the ") + what + " differs between workers: rank 0 has " + value(0) + differ);
  };
  auto differs_at = [&all](std::size_t at) { return [&all, at](std::size_t j) { return all[at + j] != all[at]; }; };
  auto count_at = [&all](std::size_t at) {
    return [&all, at](std::size_t j) { return std::to_string(static_cast<std::size_t>(all[at + j])); };
  };
  same("parameter count", differs_at(0), count_at(0));
  same("period", differs_at(3 * n), count_at(3 * n));
  same("models' layout (layout_fingerprint(): the parameters' names and shapes, the frozen ones' values)",
       [&](std::size_t j) { return differs_at(4 * n)(j) || differs_at(5 * n)(j); }, fingerprint);

  Agreed agreed;
  std::string empty;  // the same words on every worker: the ranks whose shard is empty
  std::size_t empties = 0;
  for (std::size_t j = 0; j < n; ++j) {
    if (all[n + j] == 0.0 && ++empties <= 8) empty += (empties > 1 ? ", " : "") + std::to_string(j);
    agreed.total_samples += all[n + j];
    agreed.total_batch += static_cast<std::size_t>(all[2 * n + j]);
  }
  if (empties > 8) empty += " and " + std::to_string(empties - 8) + " more";
  if (empties > 0)
    throw DistributedError("cocod: " + std::string(empties > 1 ? "ranks " : "rank ") + empty + (empties > 1 ? " have" : " has") +
                           " an empty shard (num_samples() == 0); every worker needs samples");
  return agreed;
}

}  // namespace cocod::detail
