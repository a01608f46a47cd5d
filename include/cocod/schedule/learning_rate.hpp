#pragma once
// Learning-rate schedules: pure functions of the global step t, the base rate and the run's
// total number of steps. Each validates its own hyperparameters when constructed by a schedule,
// and describe()s itself for a checkpoint to compare.
#include <charconv>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <stdexcept>
#include <string>

#include "cocod/errors.hpp"

namespace cocod::lr {

namespace detail {
[[noreturn]] inline void fail(const char* type, const char* field, const char* rule, double got) {
  invalid_setting(std::string("cocod::lr::") + type, field, rule, got);
}
/// v in the fewest digits that give it back exactly (0.1, not 0.10000000000000001).
inline std::string number(double v) {
  char b[32];
  return std::string(b, std::to_chars(b, b + sizeof b, v).ptr);
}
}  // namespace detail

/// lr(t) = base.
struct Constant {
  void validate() const {}
  [[nodiscard]] std::string describe() const { return "lr::Constant"; }
  [[nodiscard]] double operator()(double base, std::size_t, std::size_t) const { return base; }
};

/// lr(t) = base * gamma^floor(t / step_size).
struct StepDecay {
  std::size_t step_size = 1000;
  double gamma = 0.1;
  void validate() const {
    if (step_size == 0) detail::fail("StepDecay", "step_size", "must be >= 1", 0);
    if (!(gamma > 0.0 && gamma <= 1.0)) detail::fail("StepDecay", "gamma", "must be in (0, 1]", gamma);
  }
  [[nodiscard]] std::string describe() const {
    return "lr::StepDecay{step_size " + std::to_string(step_size) + ", gamma " + detail::number(gamma) + "}";
  }
  [[nodiscard]] double operator()(double base, std::size_t t, std::size_t) const {
    return base * std::pow(gamma, static_cast<double>(t / step_size));
  }
};

/// lr(t) = min_lr + (base - min_lr) (1 + cos(pi t / T)) / 2, T = total_steps, or the run's
/// number of steps when total_steps = 0; lr(t) = min_lr for t >= T.
struct Cosine {
  std::size_t total_steps = 0;
  double min_lr = 0.0;
  void validate() const {
    if (!(min_lr >= 0.0)) detail::fail("Cosine", "min_lr", "must be >= 0", min_lr);
    if (!std::isfinite(min_lr)) detail::fail("Cosine", "min_lr", "must be finite", min_lr);
  }
  [[nodiscard]] std::string describe() const {
    return "lr::Cosine{total_steps " + std::to_string(total_steps) + ", min_lr " + detail::number(min_lr) + "}";
  }
  [[nodiscard]] double operator()(double base, std::size_t t, std::size_t run_total) const {
    const std::size_t T = total_steps ? total_steps : run_total;
    if (T == 0)
      throw std::invalid_argument(
          "cocod::lr::Cosine: total_steps must be set when the run's length is not known");
    if (t >= T) return min_lr;
    const double c = std::cos(std::numbers::pi * static_cast<double>(t) / static_cast<double>(T));
    return min_lr + (base - min_lr) * (1.0 + c) / 2.0;
  }
};

/// Linear warm-up over the first `steps` steps from start_factor * base to base, then `After`
/// (which sees the step count from the start of the run).
template <class After = Constant>
struct Warmup {
  std::size_t steps = 100;
  double start_factor = 0.1;
  After after{};
  void validate() const {
    if (steps == 0) detail::fail("Warmup", "steps", "must be >= 1", 0);
    if (!(start_factor > 0.0 && start_factor <= 1.0))
      detail::fail("Warmup", "start_factor", "must be in (0, 1]", start_factor);
    after.validate();
  }
  [[nodiscard]] std::string describe() const {
    std::string then = "a schedule of its own";
    if constexpr (requires { after.describe(); }) then = after.describe();
    return "lr::Warmup{steps " + std::to_string(steps) + ", start_factor " + detail::number(start_factor) + "} then " + then;
  }
  [[nodiscard]] double operator()(double base, std::size_t t, std::size_t run_total) const {
    if (t >= steps) return after(base, t, run_total);
    const double f = start_factor + (1.0 - start_factor) * static_cast<double>(t) /
                                        static_cast<double>(steps);
    return f * after(base, t, run_total);
  }
};

/// The language models' schedule: a linear warm-up from start_factor * base to base over the
/// first `warmup_steps` steps, then a cosine decay from base to min_lr over the rest of the run:
///
///     lr(t) = base (start_factor + (1 - start_factor) t / W)                 for t < W
///     lr(t) = min_lr + (base - min_lr) (1 + cos(pi (t - W) / (T - W))) / 2    for W <= t < T
///
/// W = warmup_steps, T = total_steps or the run's number of steps when total_steps = 0;
/// lr(t) = min_lr for t >= T. Unlike Warmup<Cosine>, the cosine spans the steps after the warm-up.
struct WarmupCosine {
  std::size_t warmup_steps = 100;
  std::size_t total_steps = 0;
  double min_lr = 0.0;
  double start_factor = 0.0;
  void validate() const {
    if (!(min_lr >= 0.0) || !std::isfinite(min_lr)) detail::fail("WarmupCosine", "min_lr", "must be a finite number >= 0", min_lr);
    if (!(start_factor >= 0.0 && start_factor <= 1.0))
      detail::fail("WarmupCosine", "start_factor", "must be in [0, 1]", start_factor);
    if (total_steps != 0 && warmup_steps >= total_steps)
      detail::fail("WarmupCosine", "warmup_steps", "must be less than total_steps",
                   static_cast<double>(warmup_steps));
  }
  [[nodiscard]] std::string describe() const {
    return "lr::WarmupCosine{warmup_steps " + std::to_string(warmup_steps) + ", total_steps " + std::to_string(total_steps) +
           ", min_lr " + detail::number(min_lr) + ", start_factor " + detail::number(start_factor) + "}";
  }
  [[nodiscard]] double operator()(double base, std::size_t t, std::size_t run_total) const {
    const std::size_t T = total_steps ? total_steps : run_total;
    if (T == 0)
      throw std::invalid_argument("cocod::lr::WarmupCosine: total_steps must be set when the run's length is not known");
    if (warmup_steps >= T)
      throw std::invalid_argument("cocod::lr::WarmupCosine: warmup_steps (" + std::to_string(warmup_steps) +
                                  ") must be less than the run's " + std::to_string(T) + " steps");
    if (t < warmup_steps)
      return base * (start_factor + (1.0 - start_factor) * static_cast<double>(t) / static_cast<double>(warmup_steps));
    if (t >= T) return min_lr;
    const double c = std::cos(std::numbers::pi * static_cast<double>(t - warmup_steps) / static_cast<double>(T - warmup_steps));
    return min_lr + (base - min_lr) * (1.0 + c) / 2.0;
  }
};

}  // namespace cocod::lr
