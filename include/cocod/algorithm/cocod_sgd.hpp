#pragma once
// CoCoD-SGD: communication every k steps, overlapped with the next k steps.
#define COCOD_INTERNAL_INCLUDE
#include "cocod/algorithm/detail/trainer.hpp"
#undef COCOD_INTERNAL_INCLUDE

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
class Optimizer
    : public detail::Trainer<Optimizer<Model, Comm, Schedule, Update>, Model, Comm, Schedule, Update> {
  using Base = detail::Trainer<Optimizer, Model, Comm, Schedule, Update>;
  friend Base;
  using typename Base::T;
  using typename Base::B;
  using typename Base::Buffer;
  using typename Base::Span;

 public:
  static constexpr const char* name = "CoCoD-SGD";
  using Base::Base;
  ~Optimizer() { drain(); }

 private:
  void allocate(std::size_t n) {
    anchor_.resize(n);
    send_.resize(n + this->control_size());
    gradient_.resize(n);
  }
  void start(Span x) {
    backend::copy(B{}, anchor_.span(), x);
    backend::scale(B{}, send_.first(x.size()), x, this->weight());
    needs_post_ = true;
  }
  double compute(Model& model, Span x, std::span<const std::size_t> batch, T lr) {
    if (needs_post_) post_round();  // at the start of a round, after the callbacks voted
    const double loss = this->gradient(model, batch, gradient_.span());
    this->local_update().apply(x, gradient_.span(), lr);
    return loss;
  }
  void communicate(Span, T) {}
  void end_round(Span x) {
    await_round();
    backend::round_end(B{}, x, anchor_.span(), send_.first(x.size()), this->weight());
    needs_post_ = true;
  }
  void finish_run(Span x) {
    await_round();
    this->average(x, send_);
    needs_post_ = false;
  }
  void drain() noexcept {
    if (!in_flight_) return;
    in_flight_ = false;
    try { request_.wait(); } catch (...) {}  // the run already failed; free the buffer safely
  }

  void post_round() {
    tag_ = this->write_control(send_.span());
    posted_at_ = this->post(send_.span(), request_);
    in_flight_ = true;
    needs_post_ = false;
  }
  void await_round() {
    if (!in_flight_) return;
    in_flight_ = false;
    this->await(request_, posted_at_);
    this->read_control(send_.span(), tag_);
  }

  Buffer anchor_, send_, gradient_;
  typename Comm::Request request_{};
  comm::Clock::time_point posted_at_{};
  detail::ControlTag tag_{};
  bool in_flight_ = false, needs_post_ = false;
};

/// The paper's name for the same algorithm.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
using CoCoDSGD = Optimizer<Model, Comm, Schedule, Update>;

}  // namespace cocod
