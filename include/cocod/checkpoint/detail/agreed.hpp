#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/checkpoint/detail/agreed.hpp is internal: include <cocod/checkpoint.hpp>"
#endif
// A checkpoint's operations succeed or fail on every worker together: each worker runs its part,
// and one small all-reduce tells all of them whether any failed, so that every worker raises the
// same CheckpointError (the lowest failing rank's message) and none is left in a collective.
#include <algorithm>
#include <cstddef>
#include <exception>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cocod/errors.hpp"

namespace cocod::checkpoint::detail {

/// Every worker reports its own failure ("" when it has none) and gets the same outcome: when
/// any worker failed, every worker throws CheckpointError with the message of the lowest failing
/// rank (and how many others failed). `table` holds N * width doubles of which each worker fills
/// its own row; they are summed with the failure flags in one all-reduce, and a second one
/// carries the message only on failure.
template <class Comm>
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
  throw CheckpointError(message);
}

/// Runs f on every worker (`table` rows travel with the agreement); when it throws on any,
/// on_fail() runs and every worker throws the same CheckpointError. `unknown` is the message of
/// an exception of unknown type.
template <class Comm, class F, class OnFail>
void agreed(Comm& comm, std::vector<double>& table, const std::string& unknown, F&& f, OnFail&& on_fail) {
  std::string error;
  try {
    f();
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = unknown;
  } catch (...) {
    error = unknown;
  }
  try {
    agree_on_failure(comm, error, table);
  } catch (...) {
    on_fail();
    throw;
  }
}
template <class Comm, class F>
void agreed(Comm& comm, const std::string& unknown, F&& f) {
  std::vector<double> none;
  agreed(comm, none, unknown, std::forward<F>(f), [] {});
}

}  // namespace cocod::checkpoint::detail
