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
  void allocate(std::size_t n) {
    anchor_.resize(n);
    gradient_.resize(n);
    this->prepare(send_, n);
  }
  void start(Span x) {
    copy(B{}, anchor_.span(), x);
    scale(B{}, send_.model(), x, this->weight());
    needs_post_ = true;
  }
  double compute(Model& model, Span x, std::span<const std::size_t> batch, T lr) {
    if (needs_post_) {  // at the start of a round, after the callbacks voted
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
    if (this->withheld()) return restart_from_finite(x);
    round_end(B{}, x, anchor_.span(), send_.model(), this->weight());
  }
  void finish_run(Span x) {
    needs_post_ = false;
    if (this->await(send_) && this->withheld()) restart_from_finite(x);  // (raise: throws here)
    this->average(x, send_);
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
  // Between rounds the next all-reduce is not posted yet: the anchor and the send buffer (an
  // exchange, saved by the run) hold the round's state.
  template <class Archive>
  void serialize(Archive& a) {
    a("anchor", anchor_);
    a("needs_post", needs_post_);
    if constexpr (!Archive::saving)
      if (send_.in_flight())
        a.fail("", "does not fit section 'exchange.0', which holds a collective in flight: " + std::string(name) +
                       " has none between rounds (corrupt)");
  }

  backend::buffer<B, T> anchor_, gradient_;
  Exchange send_;  // s_i
  bool needs_post_ = false;
};

/// The paper's name for the same algorithm.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
using CoCoDSGD = Optimizer<Model, Comm, Schedule, Update>;

}  // namespace cocod
