#pragma once
// Pipe-SGD: the all-reduce of step t's gradient overlaps step t+1's computation.
#define COCOD_INTERNAL_INCLUDE
#include "cocod/algorithm/detail/trainer.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod {

/// Pipe-SGD (pipelined S-SGD with a one-step-stale gradient). Step t:
///
///     g_t = grad f_i(x_t);  post all-reduce(w_i g_t);  wait for gbar_{t-1};
///     x_{t+1} = update(x_t, gbar_{t-1}, lr_{t-1})          (x_1 = x_0)
///
/// and finish applies the last gbar. Two gradient buffers alternate. All workers keep identical
/// models. Template parameters as cocod::Optimizer.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
class PipeSGD
    : public detail::Trainer<PipeSGD<Model, Comm, Schedule, Update>, Model, Comm, Schedule, Update> {
  using Base = detail::Trainer<PipeSGD, Model, Comm, Schedule, Update>;
  friend Base;
  using typename Base::T;
  using typename Base::B;
  using typename Base::Buffer;
  using typename Base::Span;

 public:
  static constexpr const char* name = "Pipe-SGD";
  using Base::Base;
  ~PipeSGD() { drain(); }

 private:
  void allocate(std::size_t n) {
    for (auto& g : gradient_) g.resize(n + this->control_size());
  }
  void start(Span) {
    current_ = 0;
    pending_ = false;
  }
  double compute(Model& model, Span x, std::span<const std::size_t> batch, T) {
    return this->gradient(model, batch, gradient_[current_].first(x.size()));
  }
  void communicate(Span x, T lr) {
    auto g = gradient_[current_].first(x.size());
    backend::scale(B{}, g, g, this->weight());
    tag_[current_] = this->write_control(gradient_[current_].span());
    posted_at_[current_] = this->post(gradient_[current_].span(), request_[current_]);
    in_flight_[current_] = true;
    apply_previous(x);
    pending_ = true;
    pending_lr_ = lr;
    current_ ^= 1;
  }
  void end_round(Span) {}
  void finish_run(Span x) {
    apply_previous(x);
    pending_ = false;
  }
  void drain() noexcept {
    for (int b = 0; b < 2; ++b)
      if (in_flight_[b]) {
        in_flight_[b] = false;
        try { request_[b].wait(); } catch (...) {}
      }
  }

  // Waits for the all-reduce of the previous step's gradient and applies it. The previous
  // step's buffer is the other one both during communicate() (before the flip) and in finish().
  void apply_previous(Span x) {
    if (!pending_) return;
    const int previous = current_ ^ 1;
    this->await(request_[previous], posted_at_[previous]);
    in_flight_[previous] = false;
    this->read_control(gradient_[previous].span(), tag_[previous]);
    this->local_update().apply(x, gradient_[previous].first(x.size()), pending_lr_);
  }

  Buffer gradient_[2];
  typename Comm::Request request_[2]{};
  comm::Clock::time_point posted_at_[2]{};
  detail::ControlTag tag_[2]{};
  bool in_flight_[2]{};
  int current_ = 0;
  bool pending_ = false;
  T pending_lr_{};
};

}  // namespace cocod
