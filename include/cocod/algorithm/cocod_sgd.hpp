#pragma once
// CoCoD-SGD: communication every k steps, overlapped with the next k steps.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <tuple>

#include "cocod/algorithm/trainer.hpp"
#include "cocod/family/compress.hpp"
#include "cocod/family/fragments.hpp"
#include "cocod/family/merge.hpp"
#include "cocod/family/outer.hpp"
#include "cocod/family/overlap_depth.hpp"

namespace cocod {
namespace backend {
namespace passes {
template <class T>
struct RoundEnd {
  T* x;
  T* anchor;
  T* send;
  T w;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    const T xi = x[i] + (send[i] - anchor[i]);
    x[i] = xi;
    anchor[i] = xi;
    send[i] = w * xi;
  }
};
template <class T>
struct Snapshot {
  T* anchor;
  T* send;
  const T* x;
  T w;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    anchor[i] = x[i];
    send[i] = w * x[i];
  }
};
}  // namespace passes

/// CoCoD-SGD's round end, one pass over three buffers. On entry `send` holds the average
/// xbar = sum_j w_j a_j of the anchors; on exit x = x + (xbar - anchor), anchor = x, send = w x.
/// With one worker xbar == anchor bitwise, so x gains an exact zero.
template <class B, class S>
void round_end(B b, S x, S anchor, S send, element_t<S> w) {
  for_each_index(b, x.size(), passes::RoundEnd<element_t<S>>{x.data(), anchor.data(), send.data(), w});
}
/// The snapshot that is posted: anchor = x, send = w x.
template <class B, class S>
void snapshot(B b, S anchor, S send, read_only_t<S> x, element_t<S> w) {
  for_each_index(b, x.size(), passes::Snapshot<element_t<S>>{anchor.data(), send.data(), x.data(), w});
}
}  // namespace backend

namespace rules {

/// CoCoD-SGD's rule (Shen et al., IJCAI 2019). Per worker i with weight w_i = M_i / sum_j M_j:
///
///     start:      x_i = x_0 (rank 0's), a_i = x_i, s_i = w_i x_i; post all-reduce(s_i)
///     each round: k local steps on x_i                  (while the all-reduce runs)
///                 wait: s_i = xbar = sum_j w_j a_j
///                 x_i = x_i + (xbar - a_i);  a_i = x_i;  s_i = w_i x_i;  post all-reduce(s_i)
///     finish:     wait; x_i = sum_j w_j x_j             (the consensus, on every worker)
///
/// Its settings change the round end, each with its own rule (docs/algorithm.md): an Outer
/// optimizer moves an outer model z with the one-round-stale average, x_i += z' - a_i; Compress
/// sends deviations from z with error feedback; Fragments exchange one of F slices per round,
/// merged by add-back or lerp; an OverlapDepth tau < k takes the snapshot after step k - tau of
/// the round and merges it at the same round's end, so the exchange overlaps tau steps. Memory
/// beyond the model: the anchor, the send buffer (of a fragment), the gradient (which holds the
/// final consensus), momentum if used; z with the family.
template <class Ops>
class CoCoDSGD {
  using T = typename Ops::scalar_type;
  using B = typename Ops::backend_type;
  using Span = typename Ops::span_type;
  using Reduced = typename Ops::reduced_type;

 public:
  static constexpr const char* name = "CoCoD-SGD";
  using settings = std::tuple<std::optional<Outer>, Compress, Fragments, OverlapDepth>;
  explicit CoCoDSGD(const settings& s)
      : outer_rule_(std::get<0>(s)), compress_(std::get<1>(s)), fragments_(std::get<2>(s)), depth_(std::get<3>(s)) {}

  void begin(Ops& ops, Span x) {
    const std::size_t n = x.size(), F = fragments_.count;
    if (F > n) invalid_setting("cocod::Fragments", "count", "must be at most the parameter count (" + std::to_string(n) + ")", F);
    if (depth_.is_automatic() && !Ops::measuring)
      invalid_setting("cocod::OverlapDepth", "steps", "OverlapDepth::automatic needs a measuring schedule such as schedule::Adaptive",
                      "a schedule that does not measure");
    anchor_.resize(n);
    rotation_ = detail::Rotation{n, F};
    ops.prepare(send_, {.name = "send", .size = rotation_.capacity(), .compress = compress_, .model = n, .pieces = F});
    ops.prepare(gradient_, {.name = "gradient", .size = n, .scratch = true});  // and the final consensus
    family_ = outer_rule_ || compress_.active() || F > 1;
    copy(B{}, anchor_.span(), x);
    needs_post_ = true;
    snapshot_due_ = false;
    if (!family_) return scale(B{}, send_.model(), x, ops.weight());
    outer_.allocate(n, outer_rule_, F);
    outer_.start(x);
    snapshot_fragment(ops, x, 0);
  }
  void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr) {
    const std::size_t k = ops.info().period, hiding = ops.info().hiding_steps;
    const bool whole = depth_.whole(k, hiding);
    if (needs_post_ && (whole || ops.step_in_round() == k - depth_.at(k, hiding))) {
      // at the start of a round, after the callbacks voted; with a depth tau < k, after step k - tau
      if (!whole || snapshot_due_) snapshot_fragment(ops, x, rotation_.current().index);
      ops.post(send_, reference());
      needs_post_ = false;
    }
    ops.gradient(batch, gradient_.model());
    ops.update(x, gradient_.model(), lr);
  }
  void end_round(Ops& ops, Span x) {
    snapshot_due_ = !depth_.whole(ops.info().period, ops.info().hiding_steps);
    if (snapshot_due_) return end_deferred_round(ops, x);
    const Reduced r = ops.wait(send_);
    needs_post_ = true;
    if (family_) return merge(ops, r, x);
    if (r.partial()) return restart(ops, r, x);
    round_end(B{}, x, anchor_.span(), send_.model(), ops.weight());
  }
  void finish(Ops& ops, Span x) {
    needs_post_ = false;
    if (send_.in_flight()) {  // the last average is not merged: the consensus below is exact
      const Reduced r = ops.wait(send_);
      if (r.partial()) family_ ? merge(ops, r, x) : restart(ops, r, x);
    }
    ops.average(x, gradient_);
  }
  // Between rounds the next all-reduce is not posted yet: the anchor and the send buffer (an
  // exchange, saved by the run) hold the round's state (after a round with a depth tau < k, the
  // snapshot is retaken before the post).
  template <class Archive>
  void serialize(Archive& a) {
    a("anchor", anchor_);
    a("needs_post", needs_post_);
    a("snapshot_due", snapshot_due_);
    if constexpr (!Archive::saving)
      if (!needs_post_)  // the round's end waits for the snapshot that the next round's start posts
        a.fail("needs_post", "is 0, but every round posts its snapshot after a round boundary (corrupt)");
    if (!family_) return;
    outer_.serialize(a);
    rotation_.serialize(a);
    if constexpr (!Archive::saving) {
      if (send_.model_size() != rotation_.current().size)
        a.fail("fragment", "is not the fragment that section 'exchange.send' holds (corrupt)");
      send_.use(rotation_.current());
    }
  }
  // A new elastic epoch continues from the consensus of the models (the exchange in flight and
  // the error feedback are in it): only the outer optimizer's momentum is kept.
  template <class Archive>
  void serialize_carried(Archive& a) {
    if (family_) outer_.serialize_carried(a);
  }

 private:
  // The round end with a depth tau < k: the snapshot taken after step k - tau lands (with tau = 0
  // it is taken now and reduced at once) and merges by add-back; the next round's snapshot
  // waits for its step.
  void end_deferred_round(Ops& ops, Span x) {
    if (needs_post_) snapshot_fragment(ops, x, rotation_.current().index);  // tau = 0
    const Reduced r = needs_post_ ? ops.reduce(send_, reference()) : ops.wait(send_);
    needs_post_ = true;
    if (family_) return merge(ops, r, x);
    if (r.partial()) return restart(ops, r, x);
    add_back(B{}, x, anchor_.span(), send_.model());
  }
  // The piece of z a compressed exchange sends its deviation from (none without the family).
  Span reference() { return family_ ? outer_.z(rotation_.current()) : Span{}; }
  // A worker withheld its anchor from the average that landed: every worker restarts from the
  // consensus of the finite anchors (x = a = xbar, s = w x).
  void restart(Ops& ops, const Reduced& r, Span x) {
    copy(B{}, x, r.consensus());
    copy(B{}, anchor_.span(), x);
    scale(B{}, send_.model(), x, ops.weight());
    ops.acknowledge(r, Recovery::restarted);
  }
  // The family's round end for the fragment that landed (all of the model when F = 1):
  //   z' = outer(z, z - abar) (no outer optimizer: z' = abar);  x += z' - a  (add-back) or
  //   x = (1 - alpha) z' + alpha x  (lerp);  then the next fragment's snapshot a = x, s = w x.
  // A partial average: no outer step, z' = the consensus; the fragment restarts from it (all of
  // the model, from z, on a worker whose own state held the NaN).
  void merge(Ops& ops, const Reduced& r, Span x) {
    const Piece p = rotation_.current();
    Span xs = x.subspan(p.offset, p.size), as = anchor_.span().subspan(p.offset, p.size);
    if (r.partial()) {
      copy(B{}, outer_.z(p), r.consensus());
      if (r.withheld_here()) {
        copy(B{}, x, outer_.z());
        copy(B{}, anchor_.span(), x);
      } else {
        copy(B{}, xs, send_.model());
        copy(B{}, as, xs);
      }
      ops.acknowledge(r, Recovery::restarted);
    } else {
      outer_.step(p, send_.model());
      detail::merge(B{}, fragments_, xs, as, outer_.z(p));
    }
    if (snapshot_due_) {  // the next fragment's snapshot is taken in the next round, after step k - tau
      rotation_.turn_to(rotation_.next());
      send_.use(rotation_.current());
    } else
      snapshot_fragment(ops, x, rotation_.next());
  }
  // Fragment f's snapshot, posted at the next round's start (with a depth tau < k, after its
  // step k - tau): a^f = x^f, s = w x^f.
  void snapshot_fragment(Ops& ops, Span x, std::size_t f) {
    rotation_.turn_to(f);
    const Piece p = rotation_.current();
    send_.use(p);
    snapshot(B{}, anchor_.span().subspan(p.offset, p.size), send_.model(), x.subspan(p.offset, p.size), ops.weight());
  }

  std::optional<Outer> outer_rule_;
  Compress compress_;
  Fragments fragments_;
  OverlapDepth depth_;
  backend::buffer<B, T> anchor_;
  typename Ops::exchange_type send_;      // s_i (of the fragment posted next)
  typename Ops::exchange_type gradient_;  // the step's gradient, and the final consensus
  detail::OuterModel<B, T> outer_;        // z, with an outer optimizer, compression or fragments
  detail::Rotation rotation_{};
  bool family_ = false;
  bool needs_post_ = false;
  bool snapshot_due_ = false;  // the next post takes its snapshot first (the latest round had a depth tau < k)
};

}  // namespace rules

/// CoCoD-SGD (Shen et al., IJCAI 2019): communication every k steps, overlapped with the next k
/// steps (rules::CoCoDSGD has its rule). Construct it with the communicator, the Options, and
/// in any order its Schedule, its Update and the family's settings it takes: Outer, Compress,
/// Fragments, OverlapDepth.
///
/// \tparam Model    a cocod::Model.
/// \tparam Comm     a cocod::comm::Communicator (comm::Local, comm::Threads, comm::Throttled<...>, comm::Mpi).
/// \tparam Schedule decides k, M_i and the learning rate (schedule::Fixed<lr::...>).
/// \tparam Update   the local update (update::Sgd: momentum, Nesterov, weight decay).
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
using CoCoDSGD = Trainer<rules::CoCoDSGD, Model, Comm, Schedule, Update>;

/// The name CoCoD-SGD had first, kept: the same type as CoCoDSGD.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
using Optimizer = CoCoDSGD<Model, Comm, Schedule, Update>;

}  // namespace cocod
