#pragma once
// Pipe-SGD: the all-reduce of step t's gradient overlaps step t+1's computation.
#include <cstddef>
#include <span>
#include <string>

#include "cocod/algorithm/trainer.hpp"

namespace cocod {
namespace rules {

/// Pipe-SGD's rule (pipelined S-SGD with a one-step-stale gradient). Step t:
///
///     g_t = grad f_i(x_t);  post all-reduce(w_i g_t);  wait for gbar_{t-1};
///     x_{t+1} = update(x_t, gbar_{t-1}, lr_{t-1})          (x_1 = x_0)
///
/// and finish applies the last gbar. Two gradient buffers alternate. All workers keep identical
/// models.
template <class Ops>
class PipeSGD {
  using T = typename Ops::scalar_type;
  using B = typename Ops::backend_type;
  using Span = typename Ops::span_type;

 public:
  static constexpr const char* name = "Pipe-SGD";

  void begin(Ops& ops, Span x) {
    ops.prepare(gradient_[0], {.name = "gradient.0", .size = x.size(), .in_flight_between_rounds = true});
    ops.prepare(gradient_[1], {.name = "gradient.1", .size = x.size(), .in_flight_between_rounds = true});
    current_ = 0;
  }
  void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr) {
    const Span g = gradient_[current_].model();
    ops.gradient(batch, g);
    scale(B{}, g, g, ops.weight());
    ops.post(gradient_[current_]);
    apply_previous(ops, x);
    previous_lr_ = lr;
    current_ ^= 1;
  }
  void end_round(Ops&, Span) {}
  void finish(Ops& ops, Span x) { apply_previous(ops, x); }
  // The previous step's reduced gradient is in its exchange (saved by the run, completed but
  // not yet applied); it is applied with the learning rate of its step.
  template <class Archive>
  void serialize(Archive& a) {
    a("current", current_);
    a("previous_lr", previous_lr_);
    if constexpr (!Archive::saving) {
      if (current_ != 0 && current_ != 1) a.fail("current", "is not 0 or 1 (corrupt)");
      if (gradient_[current_].in_flight())  // the next step posts into it
        a.fail("current", "names section 'exchange.gradient." + std::to_string(current_) +
                              "', which holds a collective in flight (corrupt)");
    }
  }

 private:
  // Waits for the all-reduce of the previous step's gradient, if any, and applies it. The
  // previous step's buffer is the other one both in step() (before the flip) and in finish().
  void apply_previous(Ops& ops, Span x) {
    auto& previous = gradient_[current_ ^ 1];
    if (!previous.in_flight()) return;
    const auto r = ops.wait(previous);
    if (r.partial()) return ops.acknowledge(r, Recovery::kept);  // (skip) that step's update is skipped
    ops.update(x, previous.model(), previous_lr_);
  }

  typename Ops::exchange_type gradient_[2];
  int current_ = 0;
  T previous_lr_{};
};

}  // namespace rules

/// Pipe-SGD: S-SGD whose all-reduce overlaps the next step (rules::PipeSGD). Template parameters
/// as cocod::CoCoDSGD.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
using PipeSGD = Trainer<rules::PipeSGD, Model, Comm, Schedule, Update>;

}  // namespace cocod
