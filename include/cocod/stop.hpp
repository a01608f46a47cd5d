#pragma once
// How long optimize() runs.
#include <cmath>
#include <concepts>
#include <cstddef>
#include <string>

#include "cocod/errors.hpp"

namespace cocod {

/// Run for this many epochs (passes over the global data set: sum_i n_i samples).
struct Epochs {
  double count = 1.0;
  [[nodiscard]] std::size_t steps(double steps_per_epoch, std::size_t) const {
    if (!(count > 0.0) || !std::isfinite(count))
      invalid_setting("cocod::Epochs", "count", "must be a finite number > 0", count);
    const double steps = std::ceil(count * steps_per_epoch);
    if (!(steps <= 0x1p53))  // beyond, a step count is no longer exact (and may overflow)
      invalid_setting("cocod::Epochs", "count",
                      "must give at most 2^53 steps (" + std::to_string(steps_per_epoch) + " steps per epoch)", count);
    return static_cast<std::size_t>(steps);
  }
};
/// Run for this many local steps.
struct Steps {
  std::size_t count = 1;
  [[nodiscard]] std::size_t steps(double, std::size_t) const {
    if (count == 0) invalid_setting("cocod::Steps", "count", "must be >= 1", count);
    return count;
  }
};
/// Run for this many rounds of k steps.
struct Rounds {
  std::size_t count = 1;
  [[nodiscard]] std::size_t steps(double, std::size_t period) const {
    if (count == 0) invalid_setting("cocod::Rounds", "count", "must be >= 1", count);
    return count * period;
  }
};

/// What optimize() and begin(model, stop) accept as a length: a type with
/// `steps(steps_per_epoch, period) -> std::size_t`, such as Epochs, Steps and Rounds.
template <class S>
concept StopCondition = requires(const S& s, double steps_per_epoch, std::size_t period) {
  { s.steps(steps_per_epoch, period) } -> std::convertible_to<std::size_t>;
};

}  // namespace cocod
