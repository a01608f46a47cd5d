#pragma once
// S-SGD: all-reduce the weighted gradients every step, blocking.
#define COCOD_INTERNAL_INCLUDE
#include "cocod/algorithm/detail/trainer.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod {

/// Synchronous (mini-batch) SGD. Every step:
///
///     g_i = grad f_i(x; batch_i);   gbar = sum_j w_j g_j  (blocking all-reduce);   x = update(x, gbar)
///
/// All workers apply the same update, so their models (and momentum) stay identical. The period
/// only groups steps into rounds for reporting. Template parameters as cocod::Optimizer.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
class SyncSGD
    : public detail::Trainer<SyncSGD<Model, Comm, Schedule, Update>, Model, Comm, Schedule, Update> {
  using Base = detail::Trainer<SyncSGD, Model, Comm, Schedule, Update>;
  friend Base;
  using typename Base::T;
  using typename Base::B;
  using typename Base::Buffer;
  using typename Base::Span;

 public:
  static constexpr const char* name = "S-SGD";
  using Base::Base;

 private:
  void allocate(std::size_t n) { reduce_.resize(n + this->control_size()); }
  void start(Span) {}
  double compute(Model& model, Span x, std::span<const std::size_t> batch, T) {
    return this->gradient(model, batch, reduce_.first(x.size()));
  }
  void communicate(Span x, T lr) {
    auto g = reduce_.first(x.size());
    backend::scale(B{}, g, g, this->weight());
    const auto tag = this->write_control(reduce_.span());
    this->all_reduce(reduce_.span());
    this->read_control(reduce_.span(), tag);
    this->local_update().apply(x, g, lr);
  }
  void end_round(Span) {}
  void finish_run(Span) {}
  void drain() noexcept {}

  Buffer reduce_;
};

}  // namespace cocod
