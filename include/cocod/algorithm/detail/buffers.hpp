#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/buffers.hpp is internal: include <cocod.hpp>"
#endif
// A model's buffers (cocod::BufferedModel: statistics that are not trained, such as BatchNorm's
// running means): rank 0's at begin(), then their weighted average at each round's end, guarded
// like the parameters: a worker whose buffers hold a NaN or an infinity withholds them.
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "cocod/algorithm/detail/guard.hpp"
#include "cocod/algorithm/detail/recorder.hpp"
#include "cocod/backend/backend.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/errors.hpp"

namespace cocod::detail {

/// At begin(): every worker holds as many buffer elements as rank 0 (DistributedError on every
/// worker otherwise, naming the workers that differ), then rank 0's buffers.
template <class Comm, class Span>
void start_buffers(Comm& comm, Span b, int rank, int workers) {
  std::vector<double> count(static_cast<std::size_t>(workers), 0.0);
  count[static_cast<std::size_t>(rank)] = static_cast<double>(b.size());
  comm.all_reduce(std::span<double>(count));
  std::string differ;
  for (std::size_t j = 1; j < count.size(); ++j)
    if (count[j] != count[0]) differ += "; rank " + std::to_string(j) + " has " + std::to_string(static_cast<std::size_t>(count[j]));
  if (!differ.empty())
    throw DistributedError("cocod: the workers' models have different numbers of buffer elements (buffers()): rank 0 has " +
                           std::to_string(static_cast<std::size_t>(count[0])) + differ + "; every worker must build the same model");
  comm.broadcast(b, 0);
}

/// The workers that withheld their buffers from the average just taken.
struct BuffersWithheld {
  std::vector<std::size_t> ranks{};  ///< every worker whose buffers were not finite
  bool unreported = false;         ///< one of them had no finding of the parameters' guard to report it
  bool none_finite = false;        ///< no worker's buffers were finite: there is no consensus (b is left as it was)
};

/// At a round's end: b = sum_i w_i b_i, blocking, the same bits as that sum whatever the guard.
/// Guarded, the sum runs in `staging` (host memory, the buffers and 2N slots: [w_j of a worker
/// whose buffers are finite][1 or 2 where worker j withheld them; 2 when its parameters' guard
/// reports the same finding, `known`]): a worker whose buffers hold a NaN or an infinity sends
/// zeros, every worker learns of it from the same all-reduce, and b is the weighted average of
/// the finite ones.
template <class B, class Comm, class T, class Span>
BuffersWithheld average_buffers(Comm& comm, Recorder& recorder, std::span<T> staging, Span b, T weight, std::size_t step,
                                bool guarded, bool known) {
  BuffersWithheld out;
  if (b.size() == 0) return out;
  const auto t0 = comm::Clock::now();
  const std::size_t n = b.size(), N = static_cast<std::size_t>(comm.size()), rank = static_cast<std::size_t>(comm.rank());
  auto record = [&](std::size_t bytes) {
    const double w = static_cast<double>(N);
    recorder.blocking(step, t0, comm::Clock::now(), N <= 1 ? 0.0 : 2.0 * (w - 1.0) / w * static_cast<double>(bytes));
  };
  if (!guarded) {
    scale(B{}, b, b, weight);
    comm.all_reduce(b);
    record(b.size_bytes());
    return out;
  }
  const std::span<T> s = staging.first(n + 2 * N), values = s.first(n);
  std::fill(s.begin(), s.end(), T(0));
  if (all_finite(B{}, b)) {
    load(B{}, b, 0, values);
    for (T& v : values) v *= weight;  // (the products scale() takes)
    s[n + rank] = weight;
  } else {
    s[n + N + rank] = known ? T(2) : T(1);
  }
  comm.all_reduce(s);
  record(s.size_bytes());
  T kept = T(0);
  for (std::size_t j = 0; j < N; ++j) {
    kept += s[n + j];
    if (s[n + N + j] > T(0)) {
      out.ranks.push_back(j);
      out.unreported = out.unreported || s[n + N + j] == T(1);
    }
  }
  if (out.ranks.empty()) {
    store(B{}, b, 0, std::span<const T>(values));
  } else if (kept > T(0)) {
    for (T& v : values) v /= kept;
    store(B{}, b, 0, std::span<const T>(values));
  } else {
    out.none_finite = true;
  }
  return out;
}

/// A model's buffers over a run: rank 0's at begin(), their guarded average at each round's end.
template <class T>
class Buffers {
 public:
  template <class Comm, class Span>
  void start(Comm& comm, Span b, int rank, int workers) {
    start_buffers(comm, b, rank, workers);
    staging_.assign(b.size() + 2 * static_cast<std::size_t>(workers), T(0));  // once: the rounds allocate nothing
    skips_ = 0;
  }
  /// The average at a round's end. A worker whose buffers were withheld while its parameters'
  /// guard has the same finding to report (found, or its contribution withheld from the
  /// reduction just read) leaves it to that guard; otherwise the guard's policy applies to the
  /// buffers as to a reduction: NonFiniteError on every worker (raise), or a skip counted, whose
  /// words it returns ("the buffers() of rank 1 ..."; empty when nothing was skipped).
  template <class B, class Comm, class Span>
  std::string average(Comm& comm, Recorder& recorder, const Guard& guard, Span b, T weight, std::size_t round, std::size_t step) {
    if (b.size() + 2 * static_cast<std::size_t>(comm.size()) > staging_.size())
      throw std::logic_error("cocod: the model's buffers() grew during the run (" + std::to_string(staging_.size() - 2 * static_cast<std::size_t>(comm.size())) +
                             " -> " + std::to_string(b.size()) + " elements)");
    const BuffersWithheld w = average_buffers<B>(comm, recorder, std::span<T>(staging_), b, weight, step, guard.on(),
                                                 guard.found() || guard.own());
    if (w.ranks.empty()) skips_ = 0;
    if (w.ranks.empty() || !(w.unreported || w.none_finite)) return {};
    std::string who;
    for (const std::size_t r : w.ranks) who += (who.empty() ? "" : ", ") + std::to_string(r);
    const std::string which = "the buffers() of rank" + std::string(w.ranks.size() > 1 ? "s " : " ") + who + " were not finite";
    const std::string what = "cocod: a NaN or an infinity in round " + std::to_string(round) + " (step " + std::to_string(step) +
                             "): " + which + ", withheld from their average; ";
    if (w.none_finite) throw NonFiniteError(what + "no worker's were finite, so there is no consensus: the buffers are left as they were");
    if (guard.raises()) throw NonFiniteError(what + "the buffers are left at the consensus of the finite ones");
    if (++skips_ >= guard.max_skips())
      throw NonFiniteError(what + std::to_string(skips_) + " buffer averages in a row were skipped (Options::max_skips = " +
                           std::to_string(guard.max_skips()) + "); the buffers are left at the consensus of the finite ones");
    recorder.skipped();
    return which + ", withheld from their average";
  }
  /// After the guard's NonFiniteError, which every worker raised at once: the buffers' guarded
  /// average too, so that every worker's model is left at the consensus of the finite
  /// contributions. Nothing after any other error (it may be one worker's alone).
  template <class B, class Comm, class Span>
  void settle(Comm& comm, Recorder& recorder, const Guard& guard, Span b, T weight, std::size_t step) noexcept {
    if (!guard.on() || !guard.raised()) return;  // (after the buffers' own error they are settled already)
    try {
      (void)average_buffers<B>(comm, recorder, std::span<T>(staging_), b, weight, step, true, true);
    } catch (...) {  // the error that ended the run is the one to report
    }
  }

 private:
  std::vector<T> staging_;
  std::size_t skips_ = 0;  // buffer averages skipped in a row
};

}  // namespace cocod::detail
