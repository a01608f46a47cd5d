#pragma once
// The fixed schedule: the same period every round, each worker's batch size from the given
// speeds (proportional sampling), and a learning-rate schedule per step.
#include <cmath>
#include <cstddef>
#include <numeric>
#include <string>

#include "cocod/options.hpp"
#include "cocod/schedule/learning_rate.hpp"

namespace cocod::schedule {

/// What a schedule decides for a worker.
struct Plan {
  std::size_t period = 1;      ///< k, local steps per round
  std::size_t batch_size = 1;  ///< M_i, this worker's mini-batch size
  /// The fewest local steps whose compute hides one exchange (the smallest tau with tau c >= m),
  /// from a measuring schedule's latest measurements; 0 until measured (and under Fixed, or a
  /// measuring schedule that does not set it: OverlapDepth::automatic then overlaps whole rounds).
  std::size_t hiding_steps = 0;
};

/// Fixed period k = Options::period. Batch sizes: M_i = Options::batch_size when no speeds are
/// given; otherwise M_i = max(1, round(N * batch_size * s_i / sum_j s_j)), so that workers of
/// different speed finish their k steps together and the total batch stays about N * batch_size.
///
/// \tparam LearningRate a schedule from cocod::lr (Constant, StepDecay, Cosine, Warmup<...>).
template <class LearningRate = lr::Constant>
struct Fixed {
  LearningRate lr{};

  void validate() const { lr.validate(); }
  /// What a checkpoint compares: "schedule::Fixed with lr::Cosine{total_steps 0, min_lr 0}".
  [[nodiscard]] std::string describe() const {
    if constexpr (requires { lr.describe(); }) return "schedule::Fixed with " + lr.describe();
    else return "schedule::Fixed with a learning-rate schedule of its own";
  }

  [[nodiscard]] Plan plan(const Options& o, int rank, int workers) const {
    Plan p;
    p.period = o.period;
    if (o.speeds.empty()) {
      p.batch_size = o.batch_size;
    } else {
      const double total = std::accumulate(o.speeds.begin(), o.speeds.end(), 0.0);
      const double share = o.speeds[static_cast<std::size_t>(rank)] / total;
      const double m = std::round(static_cast<double>(workers) *
                                  static_cast<double>(o.batch_size) * share);
      p.batch_size = m < 1.0 ? 1 : static_cast<std::size_t>(m);
    }
    return p;
  }

  [[nodiscard]] double learning_rate(const Options& o, std::size_t step,
                                     std::size_t total_steps) const {
    return lr(o.learning_rate, step, total_steps);
  }
};

}  // namespace cocod::schedule
