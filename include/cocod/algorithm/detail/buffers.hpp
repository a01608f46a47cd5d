#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/buffers.hpp is internal: include <cocod.hpp>"
#endif
// A model's buffers (cocod::BufferedModel: statistics that are not trained, such as BatchNorm's
// running means): rank 0's at begin(), then their weighted average at each round's end.
#include <array>
#include <cstddef>
#include <span>
#include <string>

#include "cocod/algorithm/detail/recorder.hpp"
#include "cocod/backend/backend.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/errors.hpp"

namespace cocod::detail {

/// At begin(): every worker holds as many buffer elements as rank 0 (DistributedError on every
/// worker otherwise), then rank 0's buffers.
template <class Comm, class Span>
void start_buffers(Comm& comm, Span b, int rank, int workers) {
  std::array<double, 2> count{static_cast<double>(b.size()), static_cast<double>(b.size()) * static_cast<double>(b.size())};
  comm.all_reduce(std::span<double>(count));
  // All sizes are equal exactly when N sum(n^2) == (sum n)^2 (exact in double while N n^2 < 2^53).
  if (static_cast<double>(workers) * count[1] != count[0] * count[0])
    throw DistributedError("cocod: the workers' models have different numbers of buffer elements (buffers()): rank " +
                           std::to_string(rank) + " has " + std::to_string(b.size()) + "; every worker must build the same model");
  comm.broadcast(b, 0);
}

/// At a round's end: b = sum_i w_i b_i, blocking. A NaN or an infinity in any worker's buffers
/// makes the average so on every worker: a NonFiniteError on all of them (when `guarded`).
template <class B, class Comm, class Span>
void average_buffers(Comm& comm, Recorder& recorder, Span b, backend::element_t<Span> weight, std::size_t step, bool guarded) {
  if (b.size() == 0) return;
  const auto t0 = comm::Clock::now();
  scale(B{}, b, b, weight);
  comm.all_reduce(b);
  const double N = comm.size();
  const double bytes = comm.size() <= 1 ? 0.0 : 2.0 * (N - 1.0) / N * static_cast<double>(b.size_bytes());
  recorder.blocking(step, t0, comm::Clock::now(), bytes);
  if (guarded && !all_finite(B{}, b))
    throw NonFiniteError("cocod: the average of the models' buffers() is not finite at step " + std::to_string(step) +
                         " (a worker's buffers hold a NaN or an infinity)");
}

}  // namespace cocod::detail
