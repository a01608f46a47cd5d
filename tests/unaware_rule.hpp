#pragma once
// An algorithm of one's own that knows nothing of the non-finite guard: its round end scales,
// reduces and copies, as the operations allow, and never acknowledges a partial result. The guard
// must still stop it on every worker (test_non_finite under comm::Threads, test_mpi_reliability
// under comm::Mpi).
#include <cocod.hpp>

#include <cstddef>
#include <span>

namespace cocod_test {

template <class Ops>
class Unaware {
  using T = typename Ops::scalar_type;
  using B = typename Ops::backend_type;
  using Span = typename Ops::span_type;

 public:
  static constexpr const char* name = "unaware";
  void begin(Ops& ops, Span x) {
    gradient_.resize(x.size());
    ops.prepare(send_, {.name = "send", .size = x.size()});
  }
  void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr) {
    ops.gradient(batch, gradient_.span());
    ops.update(x, gradient_.span(), lr);
  }
  void end_round(Ops& ops, Span x) {
    scale(B{}, send_.model(), x, ops.weight());
    (void)ops.reduce(send_);
    copy(B{}, x, send_.model());
  }
  void finish(Ops&, Span) {}
  template <class Archive>
  void serialize(Archive&) {}

 private:
  cocod::backend::buffer<B, T> gradient_;
  typename Ops::exchange_type send_;
};

}  // namespace cocod_test
