#pragma once
// Local-SGD written from scratch as a rule of cocod::Trainer (docs/extending.md).
#include <cocod.hpp>

#include <cstddef>
#include <span>

// Each round: k local steps on x_i, then x_i = sum_j w_j x_j (blocking). cocod::Trainer runs
// the loop; the rule says what a worker does, through the operations its hooks receive.
template <class Ops>
class MyLocalSGD {
  using T = typename Ops::scalar_type;   // float or double
  using B = typename Ops::backend_type;  // the backend tag
  using Span = typename Ops::span_type;  // the span of the model's parameters

 public:
  static constexpr const char* name = "my Local-SGD";

  void begin(Ops& ops, Span x) {  // every buffer and exchange, and the per-run state, once per run
    gradient_.resize(x.size());
    ops.prepare(send_, {.name = "send", .size = x.size()});
    dirty_ = false;
  }
  void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr) {
    ops.gradient(batch, gradient_.span());
    ops.update(x, gradient_.span(), lr);  // momentum, weight decay: as the update rule says
    dirty_ = true;
  }
  void end_round(Ops& ops, Span x) {  // x = sum_j w_j x_j
    ops.average(x, send_);
    dirty_ = false;
  }
  void finish(Ops& ops, Span x) {  // a last partial round still needs its average
    if (dirty_) ops.average(x, send_);
  }
  template <class Archive>
  void serialize(Archive& a) {  // its run state, for checkpoints
    a("dirty", dirty_);
  }

 private:
  cocod::backend::buffer<B, T> gradient_;
  typename Ops::exchange_type send_;  // a reduced buffer with its collective
  bool dirty_ = false;
};

template <class Model, class Comm, class Schedule = cocod::schedule::Fixed<>, class Update = cocod::update::Sgd>
using MyLocal = cocod::Trainer<MyLocalSGD, Model, Comm, Schedule, Update>;
