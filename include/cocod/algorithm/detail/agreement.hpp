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

namespace cocod::detail {

/// Every worker reports its own failure ("" when it has none) and gets the same outcome: when
/// any worker failed, every worker throws Error with the message of the lowest failing rank (and
/// how many others failed), so that a failure seen by one worker ends the operation on all.
/// `table` holds N * width doubles of which each worker fills its own row; they are summed with
/// the failure flags in one all-reduce, and a second one carries the message only on failure.
template <class Error, class Comm>
void agree_on_failure(Comm& comm, const std::string& mine, std::vector<double>& table) {
  const auto rank = static_cast<std::size_t>(comm.rank());
  const auto n = static_cast<std::size_t>(comm.size());
  table.resize(table.size() + n, 0.0);
  double* failed = table.data() + table.size() - n;
  failed[rank] = mine.empty() ? 0.0 : 1.0;
  comm.all_reduce(std::span<double>(table));
  std::size_t first = n, count = 0;
  for (std::size_t j = 0; j < n; ++j)
    if (failed[j] > 0.0) {
      if (first == n) first = j;
      ++count;
    }
  table.resize(table.size() - n);
  if (count == 0) return;
  constexpr std::size_t width = 480;  // characters of the message that travel
  std::vector<double> text(width + 1, 0.0);
  if (rank == first) {
    const std::size_t len = std::min(mine.size(), width);
    text[0] = static_cast<double>(len);
    for (std::size_t i = 0; i < len; ++i) text[1 + i] = static_cast<double>(static_cast<unsigned char>(mine[i]));
  }
  comm.all_reduce(std::span<double>(text));
  std::string message;
  for (std::size_t i = 0; i < static_cast<std::size_t>(text[0]); ++i)
    message += static_cast<char>(static_cast<unsigned char>(text[1 + i]));
  if (count > 1) message += " (and " + std::to_string(count - 1) + " other worker(s) failed too)";
  throw Error(message);
}

}  // namespace cocod::detail
