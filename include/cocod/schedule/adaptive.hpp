#pragma once
// The adaptive schedule: batch sizes proportional to the workers' *measured* speeds and the
// period chosen from the measured compute and all-reduce times, both re-measured as the run goes.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>

#include "cocod/errors.hpp"
#include "cocod/options.hpp"
#include "cocod/schedule/fixed.hpp"
#include "cocod/schedule/learning_rate.hpp"
#include "cocod/schedule/measurement.hpp"

namespace cocod::schedule {

/// Worker j's share of `total` samples split among n workers in proportion to weight(i): every
/// worker gets one sample, the other total - n are split by largest remainder (ties to the lower
/// rank), so the shares are >= 1 and sum to exactly `total`. Needs total >= n. Allocates nothing.
template <class Weight>
[[nodiscard]] std::size_t proportional_share(std::size_t total, std::size_t n, Weight weight, std::size_t j) {
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += weight(i);
  const double spare = static_cast<double>(total - n);
  auto ideal = [&](std::size_t i) { return spare * weight(i) / sum; };
  std::size_t floors = 0;
  for (std::size_t i = 0; i < n; ++i) floors += static_cast<std::size_t>(std::floor(ideal(i)));
  const std::size_t left = total - n - std::min(floors, total - n);  // handed out by remainder, < n
  const double mine = ideal(j) - std::floor(ideal(j));
  std::size_t ahead = 0;  // workers whose remainder ranks before j's
  for (std::size_t i = 0; i < n && ahead < left; ++i) {
    const double r = ideal(i) - std::floor(ideal(i));
    if (r > mine || (r == mine && i < j)) ++ahead;
  }
  return 1 + static_cast<std::size_t>(std::floor(ideal(j))) + (ahead < left ? 1 : 0);
}

/// Measures and adapts. Starts like Fixed (period = Options::period, batch sizes from
/// Options::speeds or equal); after round `first` and then every `every` rounds, every worker
/// sends what it measured since the last re-plan with its next reduced buffer, and when that
/// buffer arrives every worker computes the same new plan, in force from the next round:
///
/// - balance: M_i proportional to worker i's measured speed (samples per second of compute),
///   the total sum_i M_i unchanged, so a slow worker takes smaller batches and finishes its k
///   steps with the others (proportional sampling; the averaging is weighted by M_i).
/// - auto_period: the smallest k with k * c >= m, at most max_period, where c is the step time
///   of the slowest worker under the new batch sizes and m the fastest worker's time of one
///   all-reduce (the others' include waiting for late workers), taken as its mean over the window
///   plus `margin` standard deviations between the window's rounds: a round whose all-reduce runs
///   long then still ends on compute, off the knee of max(k c, m).
/// - Plan::hiding_steps: that same smallest k, measured whether or not auto_period chooses the
///   period (what OverlapDepth::automatic overlaps), at most max_period or a longer fixed period.
/// - depth_share: with auto_period, the share of the round that one exchange may take: k is the
///   smallest with depth_share * k * c >= m. 1 (the default) is the rule above, where CoCoD-SGD's
///   exchange spans its whole round; with OverlapDepth::automatic (tau = the hiding steps) a
///   share s < 1 chooses a round about 1/s times as long, so the progress merged is a share s of
///   a round stale instead of all of it, and the models are averaged less often.
///
/// max_period caps the period only where auto_period chooses it; a fixed Options::period stands.
///
/// Runs with this schedule depend on measured times, so they are not bitwise reproducible.
/// A Rounds{n} stop counts rounds of the initial period.
///
/// \tparam LearningRate a schedule from cocod::lr.
template <class LearningRate = lr::Constant>
struct Adaptive {
  LearningRate lr{};
  bool balance = true;           ///< proportional sampling from measured speeds
  bool auto_period = true;       ///< choose k from measured compute and all-reduce times
  std::size_t max_period = 32;   ///< the largest k auto_period may choose
  double margin = 2.0;           ///< standard deviations of the measured all-reduce time added to its mean for auto_period
  double depth_share = 1.0;      ///< with auto_period: the share of a round one exchange may take, in (0, 1]
  std::size_t first = 3;         ///< the first re-plan follows round `first` (round 0 is not measured)
  std::size_t every = 20;        ///< then one every `every` rounds

  void validate() const {
    auto fail = [](const char* field, const char* rule, std::size_t got) {
      invalid_setting("cocod::schedule::Adaptive", field, rule, got);
    };
    if (max_period == 0) fail("max_period", "must be >= 1", max_period);
    if (first == 0) fail("first", "must be >= 1 (round 0 includes start-up and is not measured)", first);
    if (every == 0) fail("every", "must be >= 1", every);
    if (!(margin >= 0.0) || !std::isfinite(margin)) invalid_setting("cocod::schedule::Adaptive", "margin", "must be finite and >= 0", margin);
    if (!(depth_share > 0.0 && depth_share <= 1.0))
      invalid_setting("cocod::schedule::Adaptive", "depth_share", "must be in (0, 1]", depth_share);
    lr.validate();
  }
  /// What a checkpoint compares: its settings and the learning-rate schedule's.
  [[nodiscard]] std::string describe() const {
    std::string rate = "a learning-rate schedule of its own";
    if constexpr (requires { lr.describe(); }) rate = lr.describe();
    return "schedule::Adaptive{balance " + std::string(balance ? "true" : "false") + ", auto_period " +
           (auto_period ? "true" : "false") + ", max_period " + std::to_string(max_period) + ", margin " +
           lr::detail::number(margin) + ", depth_share " + lr::detail::number(depth_share) + ", first " +
           std::to_string(first) + ", every " + std::to_string(every) + "} with " + rate;
  }

  [[nodiscard]] Plan plan(const Options& o, int rank, int workers) const {
    Plan p = Fixed<LearningRate>{lr}.plan(o, rank, workers);
    if (auto_period) p.period = std::min(p.period, max_period);  // a period the user fixes stands
    return p;
  }

  [[nodiscard]] double learning_rate(const Options& o, std::size_t step, std::size_t total_steps) const {
    return lr(o.learning_rate, step, total_steps);
  }

  /// True when the measurement window closes at the end of `round` (the same on every worker).
  [[nodiscard]] bool window_closes(std::size_t round) const noexcept {
    return round >= first && (round - first) % every == 0;
  }

  /// The plan of worker `rank` from everybody's measurements; `total_batch` is sum_j M_j and
  /// `current` this worker's plan. Every worker computes it from the same numbers, so all agree.
  [[nodiscard]] Plan replan(const Options& o, int rank, int workers, std::size_t total_batch,
                            const Plan& current, const Measured& m) const {
    const auto n = static_cast<std::size_t>(workers);
    double speeds = 0.0;
    for (std::size_t j = 0; j < n; ++j) {  // a worker without a measurement: keep the plan
      if (!(m.seconds_per_sample[j] > 0.0) || !std::isfinite(m.seconds_per_sample[j])) return current;
      speeds += 1.0 / m.seconds_per_sample[j];
    }
    // Speeds beyond a double (a time per sample near 0, from a corrupt checkpoint): no measurement
    // either, or the shares below would be NaN.
    if (!std::isfinite(speeds)) return current;
    Plan p = current;
    // Speeds are 1 / seconds_per_sample; weights need only be proportional to them.
    auto batch_of = [&](std::size_t j) {
      if (!balance) return plan(o, static_cast<int>(j), workers).batch_size;
      return proportional_share(total_batch, n, [&](std::size_t i) { return 1.0 / m.seconds_per_sample[i]; }, j);
    };
    if (balance) p.batch_size = batch_of(static_cast<std::size_t>(rank));
    double step = 0.0, all_reduce = std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < n; ++j) {
      step = std::max(step, static_cast<double>(batch_of(j)) * m.seconds_per_sample[j]);
      if (m.seconds_per_collective[j] > 0.0) all_reduce = std::min(all_reduce, m.seconds_per_collective[j]);
    }
    if (std::isfinite(all_reduce)) {  // no all-reduce measured: keep the plan's
      // capped where no period this schedule runs could use more: max_period, or a longer fixed period
      const std::size_t cap = auto_period ? max_period : std::max(max_period, current.period);
      auto steps = [cap](double k) { return k < 1.0 ? 1 : k >= static_cast<double>(cap) ? cap : static_cast<std::size_t>(k); };
      p.hiding_steps = steps(std::ceil(all_reduce / step));
      if (auto_period) p.period = std::max(p.hiding_steps, steps(std::ceil(all_reduce / (depth_share * step))));
    }
    return p;
  }
};

}  // namespace cocod::schedule
