#pragma once
// S-SGD: all-reduce the weighted gradients every step, blocking.
#include <cstddef>
#include <span>

#include "cocod/algorithm/trainer.hpp"

namespace cocod {
namespace rules {

/// Synchronous (mini-batch) SGD's rule. Every step:
///
///     g_i = grad f_i(x; batch_i);   gbar = sum_j w_j g_j  (blocking all-reduce);   x = update(x, gbar)
///
/// All workers apply the same update, so their models (and momentum) stay identical. The period
/// only groups steps into rounds for reporting.
template <class Ops>
class SyncSGD {
  using T = typename Ops::scalar_type;
  using B = typename Ops::backend_type;
  using Span = typename Ops::span_type;

 public:
  static constexpr const char* name = "S-SGD";

  void begin(Ops& ops, Span x) { ops.prepare(reduce_, {.name = "gradient", .size = x.size(), .scratch = true}); }
  void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr) {
    const Span g = reduce_.model();
    ops.gradient(batch, g);
    scale(B{}, g, g, ops.weight());
    const auto r = ops.reduce(reduce_);
    if (r.partial()) return ops.acknowledge(r, Recovery::kept);  // (skip) no update: the batch is skipped
    ops.update(x, g, lr);
  }
  void end_round(Ops&, Span) {}
  void finish(Ops&, Span) {}  // the models are identical
  template <class Archive>
  void serialize(Archive&) {}  // models stay identical; the exchange is scratch between steps

 private:
  typename Ops::exchange_type reduce_;
};

}  // namespace rules

/// Synchronous (mini-batch) SGD (rules::SyncSGD). Template parameters as cocod::CoCoDSGD.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
using SyncSGD = Trainer<rules::SyncSGD, Model, Comm, Schedule, Update>;

}  // namespace cocod
