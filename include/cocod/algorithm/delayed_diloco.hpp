#pragma once
// DiLoCo with delayed outer gradients: each round's progress is averaged while the next round
// runs and moves the shared outer model one round late; eager or delayed starts.
#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "cocod/algorithm/trainer.hpp"
#include "cocod/family/compress.hpp"
#include "cocod/family/delay.hpp"
#include "cocod/family/fragments.hpp"
#include "cocod/family/outer.hpp"

namespace cocod {
namespace rules {

/// DiLoCo with delayed outer gradients (Kale, Douillard and Donchev 2025). Per worker i with
/// weight w_i, an outer optimizer (default Outer::diloco()) and the shared outer model z with its
/// momentum b, the same bits on every worker:
///
///     start:      z = s_i = x_i = x_0;  o_i = 0
///     round r:    k local steps from x_i = s_i       (while the average of round r-1 is in flight)
///     its end:    Pbar(r-1) = sum_j w_j P_j(r-1) lands (none at r = 0):
///                     z, b = outer(z, b, -Pbar(r-1));   eager: o_i += Pbar(r-1)
///                 P_i(r) = x_i - s_i;  post w_i P_i(r)   (at the next round's first step)
///                 delayed: s_i = z
///                 eager:   s_i, b_i = outer(s_i, b_i, -(o_i + w_i P_i(r)));  o_i = -w_i P_i(r)
///                 x_i = s_i
///     finish:     the last averages land on z; every x_i = z + sum_j w_j (x_j - s_j)
///                 (the progress no post carried: a partial round, the fragments not posted since)
///
/// o_i holds the other workers' latest contributions, Pbar(r-1) - w_i P_i(r-1), so that the eager
/// worker's own outer state steps on Pbar(r-1) + w_i (P_i(r) - P_i(r-1)): its fresh progress
/// replaces its one-round-old contribution, and every contribution enters its state once (with
/// one worker the eager start is Local-SGD with the outer step, bit for bit). With
/// Fragments each round posts one fragment's progress (since that fragment's last post) and
/// restarts that fragment; Compress sends the progress with error feedback. A worker whose
/// contribution was withheld restarts from z (eager: with b). Memory beyond the model: s_i, z,
/// the send buffer (of a fragment), the gradient, b with momentum; eager adds o_i and b_i.
template <class Ops>
class DelayedDiLoCo {
  using T = typename Ops::scalar_type;
  using B = typename Ops::backend_type;
  using Span = typename Ops::span_type;
  using Reduced = typename Ops::reduced_type;

 public:
  static constexpr const char* name = "Delayed-DiLoCo";
  using settings = std::tuple<std::optional<Outer>, Compress, Fragments, Delay>;
  explicit DelayedDiLoCo(const settings& s)
      : outer_rule_(std::get<0>(s).value_or(Outer::diloco())),
        compress_(std::get<1>(s)),
        fragments_(std::get<2>(s)),
        eager_(std::get<3>(s).start == OuterStart::eager) {
    if (fragments_.merge != FragmentMerge::add_back)
      invalid_setting("cocod::Fragments", "merge",
                      "must be add_back under DiLoCo with delayed outer gradients, where each fragment restarts when it is posted",
                      to_string(fragments_.merge));
  }

  void begin(Ops& ops, Span x) {
    const std::size_t n = x.size(), F = fragments_.count;
    if (F > n) invalid_setting("cocod::Fragments", "count", "must be at most the parameter count (" + std::to_string(n) + ")", F);
    rotation_ = detail::Rotation{n, F};
    ops.prepare(send_, {.name = "send", .size = rotation_.capacity(), .compress = compress_, .model = n, .pieces = F});
    ops.prepare(gradient_, {.name = "gradient", .size = n, .scratch = true});  // and the final consensus
    const bool momentum = outer_rule_.momentum > 0.0;
    for (auto* v : {&z_, &start_}) v->resize(n);
    b_.resize(momentum ? n : 0);
    own_b_.resize(eager_ && momentum ? n : 0);
    others_.resize(eager_ ? n : 0);
    zeros_.resize(compress_.active() ? rotation_.capacity() : 0);
    if (compress_.active()) zero(B{}, zeros_.span());
    if (eager_) zero(B{}, others_.span());
    copy(B{}, z_.span(), x);
    copy(B{}, start_.span(), x);
    stepped_.assign(F, 0);
    own_stepped_.assign(eager_ ? F : 0, 0);
    rotation_.turn_to(0);
    send_.use(rotation_.current());
    needs_post_ = false;
    fresh_ = true;
    weight_ = ops.weight();
  }
  void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr) {
    if (needs_post_) {  // at the start of a round, after the callbacks voted
      ops.post(send_, reference());
      needs_post_ = false;
    }
    ops.gradient(batch, gradient_.model());
    ops.update(x, gradient_.model(), lr);
    fresh_ = false;
  }
  void end_round(Ops& ops, Span x) {
    if (send_.in_flight()) {
      land(ops, ops.wait(send_), x);
      rotation_.turn_to(rotation_.next());
      send_.use(rotation_.current());
    }
    restart_fragment(ops, x);
    needs_post_ = true;
    fresh_ = true;
  }
  void finish(Ops& ops, Span x) {
    if (send_.in_flight()) {
      land(ops, ops.wait(send_), x);
      rotation_.turn_to(rotation_.next());
      send_.use(rotation_.current());
    }
    // Both starts end at the shared z after every average landed (eager: a worker's own step
    // on its estimate holds only its own share of the last round's progress).
    if (needs_post_) land(ops, ops.reduce(send_, reference()), x);  // the last round's progress
    needs_post_ = false;
    // The progress no post has carried yet (a partial round, the fragments not posted since):
    // its exact average, without an outer step. After whole rounds of one fragment it is zero.
    if (fresh_ && fragments_.count == 1) return copy(B{}, x, z_.span());
    for_each_index(B{}, x.size(), backend::passes::Progress<T>{x.data(), start_.span().data()});
    ops.average(x, gradient_);
    for_each_index(B{}, x.size(), backend::passes::Plus<T>{x.data(), z_.span().data()});
    fresh_ = true;
  }
  // Between rounds: the model finish() would return now is sum_j w_j share_j, w_j the current
  // weights (each worker's parameters alone miss the progress it handed to the exchange).
  void consensus_share(Ops& ops, Span x, Span out) {
    if (send_.in_flight())
      throw std::logic_error("cocod: Delayed-DiLoCo's consensus_share() at a round's end only (its exchange is in flight)");
    const Piece p = rotation_.current();
    const T* send = needs_post_ ? send_.model().data() : nullptr;
    for_each_index(B{}, x.size(),
                   backend::passes::ConsensusShare<T>{out.data(), x.data(), start_.span().data(), z_.span().data(),
                                                      b_.size() > 0 ? b_.span().data() : nullptr, send, p.offset,
                                                      p.offset + p.size, move(), ops.weight(), stepped_[p.index] == 0});
  }
  // Between rounds the next all-reduce is not posted yet: the send buffer (an exchange, saved by
  // the run) holds the progress that the next round's first step posts.
  template <class Archive>
  void serialize(Archive& a) {
    const std::size_t F = stepped_.size();
    a("outer_model", z_);
    a("outer_momentum", b_);
    a("stepped", stepped_);
    a("start", start_);
    a("own_momentum", own_b_);
    a("own_stepped", own_stepped_);
    a("others", others_);
    a("needs_post", needs_post_);
    a("fresh", fresh_);
    rotation_.serialize(a);
    if constexpr (!Archive::saving) {
      if (stepped_.size() != F) a.fail("stepped", "does not have one entry per fragment (corrupt)");
      if (own_stepped_.size() != (eager_ ? F : 0))
        a.fail("own_stepped", eager_ ? "does not have one entry per fragment (corrupt)" : "is not empty under the delayed start (corrupt)");
      if (!needs_post_ && (rotation_.current().index != 0 || std::count(stepped_.begin(), stepped_.end(), 1) > 0))
        a.fail("needs_post", "is 0, but every round's end leaves its progress to post (corrupt)");
      if (send_.model_size() != rotation_.current().size)
        a.fail("fragment", "is not the fragment that section 'exchange.send' holds (corrupt)");
      send_.use(rotation_.current());
    }
  }
  // A new elastic epoch starts x at the consensus of the models and keeps the outer momentum
  // (every worker's alike). Eager: each worker's own outer momentum too; z and s start at the
  // consensus, o_i at zero (each model holds its own progress). Delayed: z and s, every worker's
  // alike, are kept (x - s is then the average progress since each fragment restarted, and the
  // averages landed on z stay), and the progress not posted yet, which had left the models for
  // the send buffer, is posted again, weighted for the new membership (a newcomer posts the
  // donor's: in that one average the donor's progress counts twice).
  template <class Archive>
  void serialize_carried(Archive& a) {
    const std::size_t F = stepped_.size();
    a("outer_momentum", b_);
    a("stepped", stepped_);
    a("own_momentum", own_b_);
    a("own_stepped", own_stepped_);
    if constexpr (!Archive::saving)
      if (stepped_.size() != F || own_stepped_.size() != (eager_ ? F : 0))
        a.fail(stepped_.size() != F ? "stepped" : "own_stepped", "does not have one entry per fragment (corrupt)");
    if (!eager_) {
      a("outer_model", z_);
      a("start", start_);
    }
    bool pending = !eager_ && needs_post_;
    a("pending", pending);
    if constexpr (!Archive::saving)
      if (pending && eager_) a.fail("pending", "is set under the eager start, which posts nothing again (corrupt)");
    if (!pending) return;
    T weight = weight_;  // the one the progress was posted with
    a("weight", weight);
    rotation_.serialize(a);
    if constexpr (!Archive::saving) send_.use(rotation_.current());
    a.span("progress", send_.model());
    if constexpr (!Archive::saving) {
      if (!(weight > T(0))) a.fail("weight", "is not a worker's weight (corrupt)");
      if (weight != weight_) scale(B{}, send_.model(), send_.model(), weight_ / weight);
      needs_post_ = true;
    }
  }

 private:
  // What a compressed exchange sends the progress's deviation from: zero (the progress itself).
  Span reference() { return compress_.active() ? zeros_.span().subspan(0, rotation_.current().size) : Span{}; }
  [[nodiscard]] backend::passes::OuterMove<T> move() const {
    return {static_cast<T>(outer_rule_.learning_rate), static_cast<T>(outer_rule_.momentum), outer_rule_.nesterov};
  }
  static T* at(backend::buffer<B, T>& v, const Piece& p) { return v.size() > 0 ? v.span().data() + p.offset : nullptr; }

  // The average of the current fragment's progress landed: z, b = outer(z, b, -Pbar) (eager:
  // o += Pbar). A partial average is the consensus of the finite contributions; a worker that
  // withheld its own restarts from z, as if it had not stepped since.
  void land(Ops& ops, const Reduced& r, Span x) {
    const Piece p = rotation_.current();
    const Span pbar = r.consensus();
    for_each_index(B{}, p.size,
                   backend::passes::DelayedLanding<T>{at(z_, p), at(b_, p), eager_ ? at(others_, p) : nullptr, pbar.data(), move(),
                                                      stepped_[p.index] == 0});
    stepped_[p.index] = 1;
    if (!r.partial()) return;
    if (r.withheld_here()) restart_from_z(x);
    ops.acknowledge(r, r.withheld_here() ? Recovery::restarted : Recovery::kept,
                    "the outer model stepped on the consensus of the finite contributions, and a worker that withheld"
                    " its own starts again from it");
  }
  // x = s = z; eager: the worker's own outer state takes the shared one, with nothing pending.
  void restart_from_z(Span x) {
    copy(B{}, x, z_.span());
    copy(B{}, start_.span(), z_.span());
    if (!eager_) return;
    zero(B{}, others_.span());
    if (own_b_.size() > 0) copy(B{}, own_b_.span(), b_.span());
    own_stepped_ = stepped_;
  }
  // The current fragment's progress P = x - s goes into the send buffer, and the fragment
  // restarts: s = z (delayed) or s = the worker's own outer step (eager); x = s.
  void restart_fragment(Ops& ops, Span x) {
    const Piece p = rotation_.current();
    T* xs = x.data() + p.offset;
    if (eager_ && ops.found_non_finite()) {  // its progress will be withheld: it restarts from z, not from its own NaN step
      for_each_index(B{}, p.size, backend::passes::DelayedRestart<T>{xs, at(start_, p), send_.model().data(), at(z_, p), ops.weight()});
      restart_from_z(x);
    } else if (eager_) {
      for_each_index(B{}, p.size,
                     backend::passes::EagerRestart<T>{xs, at(start_, p), at(own_b_, p), at(others_, p), send_.model().data(), move(),
                                                      ops.weight(), own_stepped_[p.index] == 0});
      own_stepped_[p.index] = 1;
    } else {
      for_each_index(B{}, p.size, backend::passes::DelayedRestart<T>{xs, at(start_, p), send_.model().data(), at(z_, p), ops.weight()});
      weight_ = ops.weight();  // (a measuring schedule may change it between rounds)
    }
  }

  Outer outer_rule_;
  Compress compress_;
  Fragments fragments_;
  bool eager_ = true;
  typename Ops::exchange_type send_;      // w_i P_i of the fragment posted next, then its average
  typename Ops::exchange_type gradient_;  // the step's gradient, and the final consensus
  backend::buffer<B, T> z_, b_;           // the shared outer model and its momentum
  backend::buffer<B, T> start_;           // s_i, where each fragment restarted
  backend::buffer<B, T> own_b_, others_;  // eager: the worker's own outer momentum, o_i
  backend::buffer<B, T> zeros_;           // a compressed exchange's reference
  std::vector<unsigned char> stepped_, own_stepped_;  // per fragment: an outer step was taken (PyTorch's first-step buffer)
  detail::Rotation rotation_{};
  bool needs_post_ = false;  // the next round's first step posts the send buffer
  bool fresh_ = true;        // no local step since the latest round's end
  T weight_ = T(1);          // this worker's w_i when its progress was last weighted
};

}  // namespace rules

/// DiLoCo with delayed outer gradients (Kale, Douillard and Donchev 2025; rules::DelayedDiLoCo):
/// each round's progress is averaged while the next round runs. It takes Outer (default
/// Outer::diloco()), Compress, Fragments and Delay (eager or delayed starts); template
/// parameters as cocod::CoCoDSGD.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
using DelayedDiLoCo = Trainer<rules::DelayedDiLoCo, Model, Comm, Schedule, Update>;

}  // namespace cocod
