#pragma once
// How long optimize() runs.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <string>

#include "cocod/errors.hpp"

namespace cocod {

/// How far a run has come through its data: `done` passes over it by step `step`, and
/// `steps_per_epoch` steps a pass from there on. A run that continues with another number of
/// workers (a resume with workers_may_change, a new membership of an elastic run) takes
/// another number of steps a pass, so its passes are counted afresh from the step it continues
/// at; a checkpoint keeps them (section "progress"). A fresh run: {0, 0, its steps a pass}.
struct Progress {
  double done = 0.0;
  std::size_t step = 0;
  double steps_per_epoch = 0.0;  ///< 0: not counted yet (a run not begun)

  /// The passes done by step s.
  [[nodiscard]] double passes(std::size_t s) const noexcept {
    return steps_per_epoch > 0.0 ? done + (static_cast<double>(s) - static_cast<double>(step)) / steps_per_epoch : done;
  }
  /// The progress of a run that continues at step s with `spe` steps a pass: this one where
  /// the steps a pass are the same (so that an unchanged run keeps its length to the step),
  /// else the passes done by s, counted from s on.
  [[nodiscard]] Progress continued(std::size_t s, double spe) const noexcept {
    if (steps_per_epoch == spe) return *this;
    return {passes(s), s, spe};
  }
};

/// Run for this many epochs (passes over the global data set: sum_i n_i samples).
struct Epochs {
  double count = 1.0;
  [[nodiscard]] std::size_t steps(double steps_per_epoch, std::size_t) const {
    return steps_from(Progress{0.0, 0, steps_per_epoch});
  }
  /// The length of a run that has come `p` far: the step of `p` and the passes still due at
  /// its steps a pass, so that the run takes `count` passes whatever its number of workers was.
  [[nodiscard]] std::size_t steps_from(const Progress& p) const {
    if (!(count > 0.0) || !std::isfinite(count))
      invalid_setting("cocod::Epochs", "count", "must be a finite number > 0", count);
    double due = count > p.done ? (count - p.done) * p.steps_per_epoch : 0.0;
    if (p.step > 0) {  // passes summed over changes of workers: a whole number of steps up to their rounding is one
      const double whole = std::round(due);
      if (std::abs(due - whole) <= 1e-9 * std::max(1.0, whole)) due = whole;
    }
    due = std::ceil(due);
    const double steps = static_cast<double>(p.step) + due;
    if (!(steps <= 0x1p53))  // beyond, a step count is no longer exact (and may overflow)
      invalid_setting("cocod::Epochs", "count",
                      "must give at most 2^53 steps (" + std::to_string(p.steps_per_epoch) + " steps per epoch)", count);
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
/// `steps(steps_per_epoch, period) -> std::size_t`, such as Epochs, Steps and Rounds. One that
/// counts passes over the data also has `steps_from(const Progress&) -> std::size_t`, the length
/// of a run that continues with another number of workers (Steps and Rounds keep theirs).
template <class S>
concept StopCondition = requires(const S& s, double steps_per_epoch, std::size_t period) {
  { s.steps(steps_per_epoch, period) } -> std::convertible_to<std::size_t>;
};

}  // namespace cocod
