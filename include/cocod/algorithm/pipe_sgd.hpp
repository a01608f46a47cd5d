#pragma once
// Pipe-SGD: the all-reduce of step t's gradient overlaps step t+1's computation.
#include "cocod/algorithm/trainer.hpp"

namespace cocod {

/// Pipe-SGD (pipelined S-SGD with a one-step-stale gradient). Step t:
///
///     g_t = grad f_i(x_t);  post all-reduce(w_i g_t);  wait for gbar_{t-1};
///     x_{t+1} = update(x_t, gbar_{t-1}, lr_{t-1})          (x_1 = x_0)
///
/// and finish applies the last gbar. Two gradient buffers alternate. All workers keep identical
/// models. Template parameters as cocod::Optimizer.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
class PipeSGD : public Trainer<PipeSGD<Model, Comm, Schedule, Update>, Model, Comm, Schedule, Update> {
  using Base = Trainer<PipeSGD, Model, Comm, Schedule, Update>;
  friend Base;
  using typename Base::T, typename Base::B, typename Base::Span, typename Base::Exchange;

 public:
  static constexpr const char* name = "Pipe-SGD";
  using Base::Base;

 private:
  void allocate(std::size_t n) {
    for (auto& g : gradient_) this->prepare(g, n);
  }
  void start(Span) { current_ = 0; }
  double compute(Model& model, Span, std::span<const std::size_t> batch, T) {
    return this->gradient(model, batch, gradient_[current_].model());
  }
  void communicate(Span x, T lr) {
    auto g = gradient_[current_].model();
    scale(B{}, g, g, this->weight());
    this->post(gradient_[current_]);
    apply_previous(x);
    previous_lr_ = lr;
    current_ ^= 1;
  }
  void finish_run(Span x) { apply_previous(x); }
  // The previous step's reduced gradient is in its exchange (saved by the run, completed but
  // not yet applied); it is applied with the learning rate of its step.
  template <class Archive>
  void serialize(Archive& a) {
    a("current", current_);
    a("previous_lr", previous_lr_);
    if constexpr (!Archive::saving) {
      if (current_ != 0 && current_ != 1) a.fail("current", "is not 0 or 1 (corrupt)");
      if (gradient_[current_].in_flight())  // the next step posts into it
        a.fail("current", "names section 'exchange." + std::to_string(current_) +
                              "', which holds a collective in flight (corrupt)");
    }
  }

  // Waits for the all-reduce of the previous step's gradient, if any, and applies it. The
  // previous step's buffer is the other one both during communicate() (before the flip) and in
  // finish_run().
  void apply_previous(Span x) {
    auto& previous = gradient_[current_ ^ 1];
    if (!this->await(previous)) return;
    if (this->withheld()) return this->non_finite(false);  // (skip) that step's update is skipped
    this->update(x, previous.model(), previous_lr_);
  }

  Exchange gradient_[2];
  int current_ = 0;
  T previous_lr_{};
};

}  // namespace cocod
