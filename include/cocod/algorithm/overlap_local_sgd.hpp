#pragma once
// Overlap-Local-SGD: the models are pulled towards an anchor that is averaged in the background.
#include "cocod/algorithm/trainer.hpp"

namespace cocod {

/// Overlap-Local-SGD (Wang, Liang and Joshi, ICASSP 2020). The models are never replaced by an
/// average: each is pulled towards an anchor z, and the next anchor is averaged while the next
/// round's k local steps run. Per worker i, with alpha = Options::pull_alpha and
/// mu = Options::anchor_momentum:
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
/// used. Options::compress sends z - v_j as a deviation from z, with error feedback.
/// Template parameters as cocod::Optimizer.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
class OverlapLocalSGD
    : public Trainer<OverlapLocalSGD<Model, Comm, Schedule, Update>, Model, Comm, Schedule, Update> {
  using Base = Trainer<OverlapLocalSGD, Model, Comm, Schedule, Update>;
  friend Base;
  using typename Base::T, typename Base::B, typename Base::Span, typename Base::Exchange;

 public:
  static constexpr const char* name = "Overlap-Local-SGD";
  using Base::Base;

 private:
  static constexpr detail::Accepts accepts{.compress = true};

  void allocate(std::size_t n) {
    gradient_.resize(n);
    anchor_.resize(n);
    velocity_.resize(n);
    this->prepare(send_, n, n, 1);
  }
  void start(Span x) {
    copy(B{}, anchor_.span(), x);
    zero(B{}, velocity_.span());
    posted_ = needs_post_ = false;
  }
  double compute(Model& model, Span x, std::span<const std::size_t> batch, T lr) {
    if (needs_post_) {  // at the start of a round, after the callbacks voted
      this->post(send_, anchor_.span());
      needs_post_ = false;
      posted_ = true;
    }
    const double loss = this->gradient(model, batch, gradient_.span());
    this->update(x, gradient_.span(), lr);
    return loss;
  }
  void end_round(Span x) {
    land(x);
    const Options& o = this->options_;
    pull_back(B{}, x, anchor_.span(), velocity_.span(), send_.model(), static_cast<T>(o.pull_alpha),
              static_cast<T>(o.anchor_momentum), this->weight());
    needs_post_ = true;
  }
  void finish_run(Span x) {
    needs_post_ = false;
    land(x);
    this->average(x, send_);
  }
  // z = wait(), when an anchor is in flight. A withheld contribution: z is the consensus of the
  // finite ones, and a worker that withheld its own starts again from it (x = z, v = 0).
  void land(Span x) {
    if (!posted_) return;
    posted_ = false;
    this->await(send_);
    const bool incomplete = this->withheld();
    if (incomplete) this->keep_finite(send_, anchor_.span());
    copy(B{}, anchor_.span(), send_.model());
    if (!incomplete) return;
    const bool own = this->withheld_here_;
    if (own) {
      copy(B{}, x, anchor_.span());
      zero(B{}, velocity_.span());
    }
    this->non_finite(own, " the anchor is the consensus of the finite contributions, and a worker that withheld its own"
                          " model starts again from it");
  }
  template <class Archive>
  void serialize(Archive& a) {
    a("anchor", anchor_);
    a("anchor_momentum", velocity_);
    a("posted", posted_);
    a("needs_post", needs_post_);
    if constexpr (!Archive::saving)
      if (send_.in_flight() != posted_)
        a.fail("posted", "does not match section 'exchange.0' (corrupt)");
  }

  backend::buffer<B, T> gradient_, anchor_, velocity_;  // z and v_i
  Exchange send_;
  bool posted_ = false;      // an anchor is in flight (or settled, before a checkpoint)
  bool needs_post_ = false;  // the next round's start posts it
};

}  // namespace cocod
