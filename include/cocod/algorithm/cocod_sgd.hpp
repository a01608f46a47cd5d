#pragma once
// CoCoD-SGD: communication every k steps, overlapped with the next k steps.
#include "cocod/algorithm/trainer.hpp"

namespace cocod {

/// CoCoD-SGD (Shen et al., IJCAI 2019). Per worker i with weight w_i = M_i / sum_j M_j:
///
///     start:      x_i = x_0 (rank 0's), a_i = x_i, s_i = w_i x_i; post all-reduce(s_i)
///     each round: k local steps on x_i                  (while the all-reduce runs)
///                 wait: s_i = xbar = sum_j w_j a_j
///                 x_i = x_i + (xbar - a_i);  a_i = x_i;  s_i = w_i x_i;  post all-reduce(s_i)
///     finish:     wait; x_i = sum_j w_j x_j             (the consensus, on every worker)
///
/// Memory beyond the model: anchor a_i, send buffer s_i, gradient, momentum if used.
///
/// The family's options (docs/algorithm.md) change the round end, each with its own rule:
/// Options::outer moves an outer model z with the one-round-stale average,
/// x_i += z' - a_i; Options::compress sends deviations from z with error feedback;
/// Options::fragments = F exchanges one of F slices per round, merged by add-back or lerp.
///
/// \tparam Model    a cocod::Model.
/// \tparam Comm     a cocod::comm::Communicator (comm::Local, comm::Threads, comm::Throttled<...>).
/// \tparam Schedule decides k, M_i and the learning rate (schedule::Fixed<lr::...>).
/// \tparam Update   the local update (update::Sgd: momentum, Nesterov, weight decay).
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
class Optimizer : public Trainer<Optimizer<Model, Comm, Schedule, Update>, Model, Comm, Schedule, Update> {
  using Base = Trainer<Optimizer, Model, Comm, Schedule, Update>;
  friend Base;
  using typename Base::T, typename Base::B, typename Base::Span, typename Base::Exchange;

 public:
  static constexpr const char* name = "CoCoD-SGD";
  using Base::Base;

 private:
  static constexpr detail::Accepts accepts{.outer = true, .compress = true, .fragments = true};

  void allocate(std::size_t n) {
    const Options& o = this->options_;
    if (o.fragments > n)
      invalid_setting("cocod::Options", "fragments", "must be at most the parameter count (" + std::to_string(n) + ")", o.fragments);
    anchor_.resize(n);
    gradient_.resize(n);
    fragments_ = detail::Fragments{n, o.fragments};
    this->prepare(send_, fragments_.capacity(), n, o.fragments);
    family_ = o.outer.has_value() || o.compress != Compression::none || o.fragments > 1;
    if (family_) outer_.allocate(n, o.outer, o.fragments);
  }
  void start(Span x) {
    copy(B{}, anchor_.span(), x);
    needs_post_ = true;
    if (!family_) {
      scale(B{}, send_.model(), x, this->weight());
      return;
    }
    outer_.start(x);
    snapshot_fragment(x, 0);
  }
  double compute(Model& model, Span x, std::span<const std::size_t> batch, T lr) {
    if (needs_post_) {  // at the start of a round, after the callbacks voted
      if (family_)
        this->post(send_, outer_.z(fragments_.begin(posted_), fragments_.size(posted_)), fragments_.begin(posted_), posted_);
      else
        this->post(send_);
      needs_post_ = false;
    }
    const double loss = this->gradient(model, batch, gradient_.span());
    this->update(x, gradient_.span(), lr);
    return loss;
  }
  void end_round(Span x) {
    this->await(send_);
    needs_post_ = true;
    if (family_) return merge_fragment(x);
    if (this->withheld()) return restart_from_finite(x);
    round_end(B{}, x, anchor_.span(), send_.model(), this->weight());
  }
  void finish_run(Span x) {
    needs_post_ = false;
    if (this->await(send_) && this->withheld()) {  // (raise: throws here)
      if (family_)
        merge_fragment(x);
      else
        restart_from_finite(x);
    }
    if (fragments_.count == 1) return this->average(x, send_);
    for (std::size_t f = 0; f < fragments_.count; ++f) {  // the consensus, a fragment at a time
      send_.use(fragments_.size(f));
      this->average(x.subspan(fragments_.begin(f), fragments_.size(f)), send_);
    }
  }
  // A worker withheld its anchor from the average just awaited: every worker restarts from the
  // consensus of the finite anchors (x = a = xbar / W, s = w x), then as the policy says.
  void restart_from_finite(Span x) {
    this->keep_finite(send_.model());
    copy(B{}, x, send_.model());
    copy(B{}, anchor_.span(), x);
    scale(B{}, send_.model(), x, this->weight());
    this->non_finite(true);
  }
  // The family's round end for the fragment that landed (all of the model when F = 1):
  //   z' = outer(z, z - abar) (no outer optimizer: z' = abar);  x += z' - a  (add-back) or
  //   x = (1 - alpha) z' + alpha x  (lerp);  then the next fragment's snapshot a = x, s = w x.
  void merge_fragment(Span x) {
    const std::size_t f = posted_, lo = fragments_.begin(f), n = fragments_.size(f);
    Span xs = x.subspan(lo, n), as = anchor_.span().subspan(lo, n), abar = send_.model();
    if (this->withheld()) {  // z = x = a = the consensus of the finite contributions
      this->keep_finite(send_, outer_.z(lo, n));
      copy(B{}, outer_.z(lo, n), abar);
      if (this->withheld_here_) {  // its own state held the NaN: all of it starts again from z
        copy(B{}, x, outer_.z());
        copy(B{}, anchor_.span(), x);
      } else {
        copy(B{}, xs, abar);
        copy(B{}, as, xs);
      }
      this->non_finite(true);
    } else {
      outer_.step(lo, abar, f);
      if (this->options_.fragment_merge == FragmentMerge::lerp)
        lerp(B{}, xs, outer_.z(lo, n), static_cast<T>(this->options_.fragment_alpha));
      else
        add_back(B{}, xs, as, outer_.z(lo, n));
    }
    snapshot_fragment(x, (f + 1) % fragments_.count);
  }
  // Fragment f's snapshot, posted at the next round's start: a^f = x^f, s = w x^f.
  void snapshot_fragment(Span x, std::size_t f) {
    posted_ = f;
    const std::size_t lo = fragments_.begin(f), n = fragments_.size(f);
    send_.use(n);
    snapshot(B{}, anchor_.span().subspan(lo, n), send_.model(), x.subspan(lo, n), this->weight());
  }
  // Between rounds the next all-reduce is not posted yet: the anchor and the send buffer (an
  // exchange, saved by the run) hold the round's state.
  template <class Archive>
  void serialize(Archive& a) {
    a("anchor", anchor_);
    a("needs_post", needs_post_);
    if (family_) {
      outer_.serialize(a);
      a("fragment", posted_);
      if constexpr (!Archive::saving)
        if (posted_ >= fragments_.count || send_.model_size() != fragments_.size(posted_))
          a.fail("fragment", "is not a fragment of this run, or not the one section 'exchange.0' holds (corrupt)");
    }
    if constexpr (!Archive::saving)
      if (send_.in_flight())
        a.fail("", "does not fit section 'exchange.0', which holds a collective in flight: " + std::string(name) +
                       " has none between rounds (corrupt)");
  }

  backend::buffer<B, T> anchor_, gradient_;
  Exchange send_;  // s_i (of the fragment posted next)
  detail::OuterModel<B, T> outer_;  // z, with an outer optimizer, compression or fragments
  detail::Fragments fragments_{};
  std::size_t posted_ = 0;  // the fragment of the exchange posted next or in flight
  bool family_ = false;
  bool needs_post_ = false;
};

/// The paper's name for the same algorithm.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
using CoCoDSGD = Optimizer<Model, Comm, Schedule, Update>;

}  // namespace cocod
