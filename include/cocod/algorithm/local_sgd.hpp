#pragma once
// Local-SGD: k local steps, then a blocking average of the models.
#include "cocod/algorithm/trainer.hpp"

namespace cocod {

/// Local-SGD (periodic model averaging, PR-SGD). Each round:
///
///     k local steps on x_i;   x_i = sum_j w_j x_j   (blocking all-reduce)
///
/// Momentum stays local. Template parameters as cocod::Optimizer.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
class LocalSGD : public Trainer<LocalSGD<Model, Comm, Schedule, Update>, Model, Comm, Schedule, Update> {
  using Base = Trainer<LocalSGD, Model, Comm, Schedule, Update>;
  friend Base;
  using typename Base::T, typename Base::B, typename Base::Span, typename Base::Exchange;

 public:
  static constexpr const char* name = "Local-SGD";
  using Base::Base;

 private:
  void allocate(std::size_t n) {
    gradient_.resize(n);
    this->prepare(send_, n);
  }
  void start(Span) { averaged_ = true; }
  double compute(Model& model, Span x, std::span<const std::size_t> batch, T lr) {
    const double loss = this->gradient(model, batch, gradient_.span());
    this->update(x, gradient_.span(), lr);
    averaged_ = false;
    return loss;
  }
  void end_round(Span x) {
    this->average(x, send_);
    averaged_ = true;
  }
  void finish_run(Span x) {
    if (!averaged_) this->average(x, send_);
  }
  template <class Archive>
  void serialize(Archive& a) {
    a("averaged", averaged_);
    if constexpr (!Archive::saving)
      if (send_.in_flight())
        a.fail("", "does not fit section 'exchange.0', which holds a collective in flight: " + std::string(name) +
                       " has none between rounds (corrupt)");
  }

  backend::buffer<B, T> gradient_;
  Exchange send_;
  bool averaged_ = true;
};

}  // namespace cocod
