#pragma once
// Overlap-Local-SGD: the models are pulled towards an anchor that is averaged in the background.
#include <cstddef>
#include <span>
#include <tuple>

#include "cocod/algorithm/trainer.hpp"
#include "cocod/family/compress.hpp"
#include "cocod/family/pull_back.hpp"

namespace cocod {
namespace backend {
namespace passes {
template <class T>
struct PullBackStep {
  T* x;
  const T* z;
  T* v;
  T* send;
  T alpha, mu, w;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    x[i] -= alpha * (x[i] - z[i]);
    v[i] = mu == T(0) ? z[i] - x[i] : mu * v[i] + (z[i] - x[i]);
    send[i] = w * (z[i] - v[i]);
  }
};
}  // namespace passes

/// Overlap-Local-SGD's round end, one pass: x = x - alpha * (x - z);  v = mu * v + (z - x)
/// (v = z - x when mu = 0);  send = w * (z - v).
template <class B, class S>
void pull_back(B b, S x, read_only_t<S> z, S v, S send, element_t<S> alpha, element_t<S> mu, element_t<S> w) {
  for_each_index(b, x.size(), passes::PullBackStep<element_t<S>>{x.data(), z.data(), v.data(), send.data(), alpha, mu, w});
}
}  // namespace backend

namespace rules {

/// Overlap-Local-SGD's rule (Wang, Liang and Joshi, ICASSP 2020). The models are never replaced
/// by an average: each is pulled towards an anchor z, and the next anchor is averaged while the
/// next round's k local steps run. Per worker i, with alpha = PullBack::alpha and
/// mu = PullBack::anchor_momentum:
///
///     start:      z = x_0, v_i = 0
///     each round: k local steps on x_i                       (while the all-reduce runs)
///                 z = wait()                                  (round 0: z = x_0)
///                 x_i = x_i - alpha (x_i - z)                 (pull-back)
///                 v_i = mu v_i + (z - x_i)                    (anchor momentum)
///                 post z_next = sum_j w_j (z - v_j)           (mu = 0: the average of the x_j)
///     finish:     wait; x_i = sum_j w_j x_j                   (the consensus, on every worker)
///
/// Memory beyond the model: anchor z, anchor momentum v_i, send buffer, gradient, momentum if
/// used. Compress sends z - v_j as a deviation from z, with error feedback.
template <class Ops>
class OverlapLocalSGD {
  using T = typename Ops::scalar_type;
  using B = typename Ops::backend_type;
  using Span = typename Ops::span_type;

 public:
  static constexpr const char* name = "Overlap-Local-SGD";
  using settings = std::tuple<PullBack, Compress>;
  explicit OverlapLocalSGD(const settings& s) : pull_(std::get<0>(s)), compress_(std::get<1>(s)) {}

  void begin(Ops& ops, Span x) {
    const std::size_t n = x.size();
    anchor_.resize(n);
    velocity_.resize(n);
    ops.prepare(send_, {.name = "anchor", .size = n, .compress = compress_});
    ops.prepare(gradient_, {.name = "gradient", .size = n, .scratch = true});  // and the final consensus
    copy(B{}, anchor_.span(), x);
    zero(B{}, velocity_.span());
    needs_post_ = false;
  }
  void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr) {
    if (needs_post_) {  // at the start of a round, after the callbacks voted
      ops.post(send_, anchor_.span());
      needs_post_ = false;
    }
    ops.gradient(batch, gradient_.model());
    ops.update(x, gradient_.model(), lr);
  }
  void end_round(Ops& ops, Span x) {
    land(ops, x);
    pull_back(B{}, x, anchor_.span(), velocity_.span(), send_.model(), static_cast<T>(pull_.alpha),
              static_cast<T>(pull_.anchor_momentum), ops.weight());
    needs_post_ = true;
  }
  void finish(Ops& ops, Span x) {
    needs_post_ = false;
    land(ops, x);
    ops.average(x, gradient_);
  }
  template <class Archive>
  void serialize(Archive& a) {
    a("anchor", anchor_);
    a("anchor_momentum", velocity_);
    a("needs_post", needs_post_);
  }
  // A new elastic epoch keeps each worker's anchor momentum; the anchor starts at the consensus.
  template <class Archive>
  void serialize_carried(Archive& a) {
    a("anchor_momentum", velocity_);
  }

 private:
  // z = wait(), when an anchor is in flight. A partial average: z is the consensus of the finite
  // contributions, and a worker that withheld its own starts again from it (x = z, v = 0).
  void land(Ops& ops, Span x) {
    if (!send_.in_flight()) return;
    const auto r = ops.wait(send_);
    copy(B{}, anchor_.span(), r.consensus());
    if (!r.partial()) return;
    if (r.withheld_here()) {
      copy(B{}, x, anchor_.span());
      zero(B{}, velocity_.span());
    }
    ops.acknowledge(r, r.withheld_here() ? Recovery::restarted : Recovery::kept,
                    "the anchor is the consensus of the finite contributions, and a worker that withheld its own"
                    " model starts again from it");
  }

  PullBack pull_;
  Compress compress_;
  backend::buffer<B, T> anchor_, velocity_;  // z and v_i
  typename Ops::exchange_type send_;
  typename Ops::exchange_type gradient_;  // the step's gradient, and the final consensus
  bool needs_post_ = false;               // the next round's start posts the anchor
};

}  // namespace rules

/// Overlap-Local-SGD (Wang, Liang and Joshi, ICASSP 2020; rules::OverlapLocalSGD). It takes
/// PullBack and Compress; template parameters as cocod::CoCoDSGD.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
using OverlapLocalSGD = Trainer<rules::OverlapLocalSGD, Model, Comm, Schedule, Update>;

}  // namespace cocod
