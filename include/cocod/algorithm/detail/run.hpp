#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/run.hpp is internal: include <cocod.hpp>"
#endif
// A run as a short loop over parts that each own their run state (detail::RunState: the loop,
// the reducer, the non-finite guard, the measurement window, the local update's state and the
// recorder): setup, a step, a round's end, finish. cocod::Trainer drives it; an algorithm sees
// it only through cocod::Operations.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "cocod/algorithm/detail/agreement.hpp"
#include "cocod/algorithm/detail/buffers.hpp"
#include "cocod/algorithm/detail/run_state.hpp"
#include "cocod/options.hpp"

namespace cocod::detail {

template <class Model, class Comm, class Schedule, class Update>
class Run : public RunState<Model, Comm, Schedule, Update> {
  using Base = RunState<Model, Comm, Schedule, Update>;
  using Calls = ModelCalls<Model>;
  using Base::options_, Base::schedule_, Base::update_, Base::update_state_, Base::recorder_, Base::guard_,
      Base::loop_, Base::window_, Base::reducer_, Base::events_;

 public:
  using typename Base::T, typename Base::B, typename Base::Span, typename Base::CommImpl;
  using Base::Base, Base::emit, Base::measuring;

  /// Starts a run: the workers agree on the sizes, rank 0's parameters are broadcast (unless
  /// `broadcast` is false: every worker holds the same already), every part starts, and
  /// begin(x) starts the algorithm.
  template <class Begin>
  void setup(Model& model, const char* name, bool broadcast, Begin&& begin) {
    static_assert(!(requires(Model& m) { m.buffers(); } && !BufferedModel<Model>),
                  "cocod::BufferedModel: the model's buffers() must return one contiguous buffer of the parameters' "
                  "scalar and memory space, by reference or as a view (std::span<T>, cocod::device_span<T>), not an "
                  "owning container by value");
    if (running_) throw std::logic_error("cocod: begin() called twice without finish()");
    const auto run_start = comm::Clock::now();
    auto& comm = reducer_.comm();
    Span x = Calls::parameters(model);
    const schedule::Plan plan = schedule_.plan(options_, comm.rank(), comm.size());
    const std::size_t samples = Calls::num_samples(std::as_const(model));
    reducer_.drain();  // what a failed run left in flight, before anything moves
    std::uint64_t layout = 0;
    if constexpr (requires(const Model& m) { { m.layout_fingerprint() } -> std::convertible_to<std::uint64_t>; })
      layout = std::as_const(model).layout_fingerprint();
    const Agreed agreed = agree(comm, x.size(), samples, plan.batch_size, plan.period, layout);
    if (broadcast) comm.broadcast(x, 0);
    const RunInfo info{name, comm.rank(), comm.size(), x.size(), plan.period, plan.batch_size, agreed.total_batch,
                       static_cast<double>(plan.batch_size) / static_cast<double>(agreed.total_batch),
                       agreed.total_samples / static_cast<double>(agreed.total_batch), 0, plan.hiding_steps};
    const auto workers = static_cast<std::size_t>(info.workers);
    loop_.start(info, plan, samples, options_.seed, measuring ? info.total_batch : plan.batch_size);
    window_.start(info.workers);
    guard_.start(workers);
    reducer_.start(workers, window_.slots());
    update_state_ = update_.template start<B, T>(x.size());
    recorder_.start(info, run_start, options_.report_rounds);
    running_ = true;
    try {
      begin(x);
      check_acknowledged();
      if constexpr (BufferedModel<Model>) buffers_.start(comm, as_span(model.buffers()), info.rank, info.workers);
    } catch (...) {
      abandon();
      throw;
    }
  }
  void set_length(std::size_t total_steps) {
    loop_.set_length(total_steps);
    recorder_.reserve(loop_.info(), measuring ? total_steps : total_steps / loop_.plan().period);
  }
  /// The model's parameters during a run (`who` names the call in the error otherwise).
  Span parameters(Model& model, const char* who) {
    if (!running_) throw std::logic_error(std::string("cocod: ") + who + "() called before begin()");
    Span x = Calls::parameters(model);
    if (x.size() != loop_.info().parameters) {
      abandon();  // the run cannot go on
      throw std::logic_error("cocod: the model's parameter count changed during the run (" +
                             std::to_string(loop_.info().parameters) + " -> " + std::to_string(x.size()) + ")");
    }
    return x;
  }

  /// One step: step(lr) runs the algorithm's step, and at the round's end end_round() its round
  /// end. Returns the step's loss. A step that throws ends the run: what is in flight is waited
  /// for, and begin() may start anew.
  template <class Step, class EndRound>
  double step(Model& model, Step&& step, EndRound&& end_round) {
    try {
      Position& pos = loop_.pos();
      const auto t0 = comm::Clock::now();
      if (pos.step_in_round == 0) {
        recorder_.begin_round(pos.round, pos.step, loop_.plan().period, loop_.plan().batch_size, t0);
        pos.loss_sum = 0.0;
      }
      pos.learning_rate = schedule_.learning_rate(options_, pos.step, pos.total_steps);
      const double waited_before = recorder_.waited();
      step_loss_.reset();
      in_step_ = true;
      step(static_cast<T>(pos.learning_rate));
      in_step_ = false;
      if (!step_loss_) throw std::logic_error("cocod: " + loop_.info().algorithm + ": its step() must compute the step's gradient (Operations::gradient)");
      check_acknowledged();
      if constexpr (requires { reducer_.comm().progress(); }) reducer_.comm().progress();  // communicators without a thread
      reducer_.advance();  // a compressed exchange's second collective
      recorder_.step(pos.step, t0, comm::Clock::now(), waited_before);
      if (loop_.advance()) {
        end_round();
        check_acknowledged();
        reducer_.check_round_end();
        average_buffers(model);
        if (reducer_.take_collectives() == 0) reducer_.reduce_control(this->context());  // losses, votes, the step check
        close_round();
      }
      return *step_loss_;
    } catch (const NonFiniteError&) {  // raised on every worker at once: the buffers too go to the finite consensus
      if constexpr (BufferedModel<Model>)
        buffers_.template settle<B>(reducer_.comm(), recorder_, guard_, as_span(model.buffers()), static_cast<T>(weight()), loop_.pos().step);
      abandon();
      throw;
    } catch (...) {
      abandon();
      throw;
    }
  }
  /// Ends the run: a partial round is closed, then finish() leaves the consensus in the model.
  /// Its reductions say that this worker is finishing, and one of the control slots alone runs
  /// when it has none, so that a worker that ends at another step than the others (another run
  /// length) fails with them, the same DistributedError on every worker.
  template <class Finish>
  Report finish(Model& model, Finish&& finish) {
    try {
      Position& pos = loop_.pos();
      // An agreed stop ended the run, whether optimize() or a loop of the caller's own saw it
      // (a request that finish()'s reductions bring is too late to have ended it).
      if (reducer_.votes().state().stop_agreed) recorder_.stopped_early();
      pos.finishing = true;
      if (pos.step_in_round != 0) {  // (a full round averaged the buffers at its end)
        average_buffers(model);
        reducer_.votes().loss_ready(pos.round, pos.loss_sum / static_cast<double>(pos.step_in_round));
        close_round();
      }
      (void)reducer_.take_collectives();
      finish();
      check_acknowledged();
      if (reducer_.take_collectives() == 0) reducer_.reduce_control(this->context());
      recorder_.final_consensus(reducer_.votes().state().consensus_round, reducer_.votes().state().consensus_loss);
      pos.finishing = false;
    } catch (...) {
      abandon();
      throw;
    }
    running_ = false;
    return recorder_.finish(loop_.pos().step, loop_.epochs());
  }
  /// Ends a run that failed: waits for what is in flight, without a consensus.
  void abandon() noexcept {
    reducer_.drain();
    in_step_ = running_ = false;
  }

  /// A gradient was computed: the step's loss is its first (a NaN is the guard's finding).
  void gradient_computed(double loss) {
    if (!in_step_ || step_loss_) return;
    step_loss_ = loss;
    const Position& pos = loop_.pos();
    guard_.loss(loss, pos.step);
    if (loop_.count(loss)) reducer_.votes().loss_ready(pos.round, pos.loss_sum / static_cast<double>(loop_.plan().period));
  }
  /// A partial result was dealt with (Operations::acknowledge).
  void acknowledge(std::size_t ticket, bool replaced, bool own, const char* left) {
    if (!guard_.pending(ticket)) return;  // (acknowledged already)
    if (guard_.held_nan(replaced, own)) {
      if constexpr (requires { update_state_.reset(); }) update_state_.reset();
    }
    guard_.acknowledge(ticket, replaced, left, loop_.pos().round, loop_.pos().step, [&] {
      recorder_.skipped();
      emit({.kind = Event::Kind::skipped, .message = "skipped a reduction: a worker's contribution was not finite, withheld (NonFinite::skip)"});
    });
  }

  /// Where the run tells its events (empty: nowhere).
  void on_event(EventSink sink) { events_.set(std::move(sink)); }
  [[nodiscard]] double weight() const noexcept { return loop_.info().weight; }
  [[nodiscard]] bool running() const noexcept { return running_; }

 private:
  void average_buffers(Model& model) {
    if constexpr (BufferedModel<Model>) {
      const std::string skipped = buffers_.template average<B>(reducer_.comm(), recorder_, guard_, as_span(model.buffers()),
                                                              static_cast<T>(weight()), loop_.pos().round, loop_.pos().step);
      if (!skipped.empty()) emit({.kind = Event::Kind::skipped, .message = skipped + " (NonFinite::skip)"});
    } else {
      (void)model;
    }
  }
  void close_round() {
    const Position& pos = loop_.pos();
    const RoundStats& now = recorder_.current();
    window_.add(schedule_, schedule::RoundSample{pos.round, now.compute_s, static_cast<double>(pos.step_in_round * loop_.plan().batch_size),
                                                 now.comm_s, recorder_.take_collectives()});
    recorder_.close_round([&](RoundStats& r) {
      r.steps = pos.step_in_round;
      r.loss = pos.loss_sum / static_cast<double>(pos.step_in_round);
      r.learning_rate = pos.learning_rate;
      r.epoch = loop_.epochs();
      r.consensus_loss = reducer_.votes().state().consensus_loss;
      r.consensus_loss_round = reducer_.votes().state().consensus_round;
    });
    loop_.next_round();
    schedule::Plan next;
    if (window_.take(next)) {  // every worker at the same round boundary
      const schedule::Plan before = loop_.plan();
      loop_.apply(next);
      events_.replanned(before, loop_.plan(), window_.measured(), loop_.info().rank, loop_.pos());
    }
  }
  // A partial result must be acknowledged in the hook that read it, on every worker.
  void check_acknowledged() {
    if (guard_.pending())
      guard_.fail(loop_.info().algorithm + " did not acknowledge the partial result (Operations::acknowledge), so the run stops",
                  loop_.pos().round, loop_.pos().step);
  }

  std::optional<double> step_loss_;
  Buffers<T> buffers_{};
  bool running_ = false, in_step_ = false;
};

}  // namespace cocod::detail
