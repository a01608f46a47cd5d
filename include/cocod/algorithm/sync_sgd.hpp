#pragma once
// S-SGD: all-reduce the weighted gradients every step, blocking.
#include "cocod/algorithm/trainer.hpp"

namespace cocod {

/// Synchronous (mini-batch) SGD. Every step:
///
///     g_i = grad f_i(x; batch_i);   gbar = sum_j w_j g_j  (blocking all-reduce);   x = update(x, gbar)
///
/// All workers apply the same update, so their models (and momentum) stay identical. The period
/// only groups steps into rounds for reporting. Template parameters as cocod::Optimizer.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
class SyncSGD : public Trainer<SyncSGD<Model, Comm, Schedule, Update>, Model, Comm, Schedule, Update> {
  using Base = Trainer<SyncSGD, Model, Comm, Schedule, Update>;
  friend Base;
  using typename Base::T, typename Base::B, typename Base::Span, typename Base::Exchange;

 public:
  static constexpr const char* name = "S-SGD";
  using Base::Base;

 private:
  void allocate(std::size_t n) { this->prepare(reduce_, n); }
  double compute(Model& model, Span, std::span<const std::size_t> batch, T) {
    return this->gradient(model, batch, reduce_.model());
  }
  void communicate(Span x, T lr) {
    auto g = reduce_.model();
    scale(B{}, g, g, this->weight());
    this->reduce(reduce_);
    if (this->withheld()) return this->non_finite(false);  // (skip) no update: the batch is skipped
    this->update(x, g, lr);
  }

  // Models stay identical; the exchange is scratch between steps, never in flight.
  template <class Archive>
  void serialize(Archive& a) {
    if constexpr (!Archive::saving)
      if (reduce_.in_flight())
        a.fail("", "does not fit section 'exchange.0', which holds a collective in flight: " + std::string(name) +
                       " has none between rounds (corrupt)");
  }

  Exchange reduce_;
};

}  // namespace cocod
