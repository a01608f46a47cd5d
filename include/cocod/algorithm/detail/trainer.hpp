#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/trainer.hpp is internal: include <cocod.hpp>"
#endif
// The data path every algorithm shares: set-up and agreement between workers, batch sampling,
// gradients and local updates, timing of compute / communication / waits, the control slots
// that carry losses and stop requests, callbacks and the report. An algorithm (CRTP `Derived`)
// supplies only what it does with communication:
//   allocate(n)            its buffers (model part n, plus control_slots where it reduces)
//   start(x)               after x was broadcast
//   compute(model, x, batch, lr) -> loss     the step's gradient and local work
//   communicate(x, lr)     the step's communication (after the loss is counted)
//   end_round(x)           at the end of every full round
//   finish_run(x)          at the end of the run (consensus)
//   drain()                wait for anything in flight (called before buffers die)
#define COCOD_TRAINER_INCLUDED
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cocod/backend/backend.hpp"
#include "cocod/callbacks/hooks.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/data/sampler.hpp"
#include "cocod/errors.hpp"
#include "cocod/model/concepts.hpp"
#include "cocod/options.hpp"
#include "cocod/report.hpp"
#include "cocod/schedule/adaptive.hpp"
#include "cocod/schedule/fixed.hpp"
#include "cocod/stop.hpp"
#include "cocod/trace/timeline.hpp"
#include "cocod/update/sgd.hpp"

namespace cocod::detail {

/// Each reduced buffer carries extra slots after the model part:
/// [w_i * (latest complete round's mean loss), stop votes]. Summed, they give every worker the
/// same consensus loss and the same stop decision without an extra collective. A measuring
/// schedule (schedule::Adaptive) adds 2N slots, [seconds per sample of worker 0..N-1, seconds
/// per all-reduce of worker 0..N-1], in which each worker fills its own entries and leaves the
/// others 0: the sum hands everybody the same measurements.
inline constexpr std::size_t control_slots = 2;

/// A schedule that re-plans from measurements (see schedule::Adaptive).
template <class S>
concept measuring_schedule = requires(const S& s, const Options& o, const schedule::Plan& p,
                                      const schedule::Measured& m, std::size_t round) {
  { s.window_closes(round) } -> std::same_as<bool>;
  { s.replan(o, 0, 1, round, p, m) } -> std::same_as<schedule::Plan>;
};

/// What the control slots of one reduced buffer carry (every worker writes the same tag).
struct ControlTag {
  std::size_t loss_round = static_cast<std::size_t>(-1);  ///< round whose loss they carry, or npos
  bool measured = false;                                  ///< they carry a measurement window
};

template <class Derived, class Model, class Comm, class Schedule, class Update>
class Trainer {
  static_assert(check_model<Model>(), "see the cocod::Model message above");
  static_assert(comm::Communicator<Comm>,
                "cocod: Comm must satisfy cocod::comm::Communicator (rank, size, broadcast, "
                "all_reduce, all_reduce_async for float and double)");
  static_assert(requires(Comm& c, span_of_t<Model> s) {
    c.broadcast(s, 0);
    c.all_reduce(s);
    c.all_reduce_async(s);
  }, "cocod: Comm cannot move buffers of this model's backend (device parameters need a communicator with "
     "device_span overloads, such as comm::Threads with <cocod/backend/cuda.hpp>)");

 public:
  using model_type = Model;
  using communicator_type = Comm;
  using scalar_type = scalar_of_t<Model>;
  using backend_type = backend_of_model_t<Model>;
  /// Span for host parameters, device_span<T> for device parameters.
  using span_type = span_of_t<Model>;
  /// True when the schedule measures and re-plans (batch sizes, period) during the run.
  static constexpr bool adaptive = measuring_schedule<Schedule>;

  /// Validates options (std::invalid_argument naming the field) against the communicator.
  Trainer(Comm comm, Options options, Schedule schedule = {}, Update update = {})
      : comm_(std::move(comm)),
        options_(std::move(options)),
        schedule_(std::move(schedule)),
        update_(std::move(update)) {
    options_.validate(comm_.size());
    schedule_.validate();
  }
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Step-level API: starts a run of unknown length. Every worker must call it (it agrees on
  /// the parameter count, broadcasts rank 0's parameters and computes the weights w_i).
  void begin(Model& model) { setup(model); }
  /// Starts a run whose length is given by Epochs, Steps or Rounds.
  template <class Stop>
  void begin(Model& model, const Stop& stop) {
    setup(model);
    total_steps_ = stop.steps(info_.steps_per_epoch, plan_.period);
    report_.rounds.reserve((adaptive ? total_steps_ : total_steps_ / plan_.period) + 1);
    if (lane_) lane_->reserve(lane_->events().size() + 3 * total_steps_ + 8);  // steps, waits, collectives
    info_.total_steps = total_steps_;
    report_.info = info_;
  }

  /// This worker's next mini-batch of sample indices (valid until the next call). Its size is
  /// the plan's M_i, which an adaptive schedule changes between rounds.
  [[nodiscard]] std::span<const std::size_t> next_batch() {
    sampler_.next(batch_);
    return batch_;
  }

  /// One local step on `batch` (and, at the k-th step of a round, the round's end). Every worker
  /// calls step the same number of times. Returns this worker's mini-batch loss.
  double step(Model& model, std::span<const std::size_t> batch) {
    if (!running_) throw std::logic_error("cocod: step() called before begin()");
    auto x = parameters(model);
    const auto t0 = comm::Clock::now();
    if (step_in_round_ == 0) {
      current_ = RoundStats{};
      current_.round = round_;
      current_.first_step = step_;
      current_.period = plan_.period;
      current_.batch_size = plan_.batch_size;
      round_start_ = t0;
      loss_sum_ = 0.0;
    }
    lr_ = schedule_.learning_rate(options_, step_, total_steps_);
    const double waited_before = current_.wait_s;
    const double loss = self().compute(model, x, batch, static_cast<scalar_type>(lr_));
    if constexpr (requires { comm_.progress(); }) comm_.progress();  // communicators without a thread
    loss_sum_ += loss;
    if (step_in_round_ + 1 == plan_.period) mark_round_loss_ready(step_in_round_ + 1);
    self().communicate(x, static_cast<scalar_type>(lr_));
    const auto t1 = comm::Clock::now();
    current_.compute_s += seconds(t1 - t0) - (current_.wait_s - waited_before);
    if (lane_) lane_->record(trace::Kind::step, step_, t0, t1);
    ++step_;
    ++step_in_round_;
    round_ended_ = false;
    if (step_in_round_ == plan_.period) {
      self().end_round(x);
      close_round();
    }
    return loss;
  }

  /// Ends the run: finishes a partial round, waits for communication in flight and leaves the
  /// consensus model (the same on every worker) in `model`.
  Report finish(Model& model) {
    if (!running_) throw std::logic_error("cocod: finish() called before begin()");
    auto x = parameters(model);
    if (step_in_round_ > 0) {
      mark_round_loss_ready(step_in_round_);
      close_round();
    }
    self().finish_run(x);
    running_ = false;
    report_.steps = step_;
    report_.epochs = epochs();
    report_.seconds = seconds(comm::Clock::now() - run_start_);
    return std::move(report_);
  }

  /// Runs until `stop` (Epochs, Steps or Rounds) or until a callback asks to stop, then
  /// finishes. Callbacks are detected at compile time (see cocod/callbacks/hooks.hpp).
  template <class Stop, class... Callbacks>
  Report optimize(Model& model, const Stop& stop, Callbacks&&... callbacks) {
    begin(model, stop);
    (callbacks::hooks::begin(callbacks, info_), ...);
    while (step_ < total_steps_) {
      const double loss = step(model, next_batch());
      if constexpr (sizeof...(Callbacks) > 0) {
        const StepInfo s{step_ - 1, loss, lr_};
        bool stop_asked = false;
        ((stop_asked |= callbacks::hooks::step(callbacks, s)), ...);
        if (stop_asked) request_stop();
      }
      if (round_ended_) {
        if constexpr (sizeof...(Callbacks) > 0) {
          bool stop_asked = false;
          ((stop_asked |= callbacks::hooks::round(callbacks, report_.rounds.back())), ...);
          if (stop_asked) request_stop();
        }
        if (stop_agreed_) {
          report_.stopped_early = true;
          break;
        }
      }
    }
    const std::size_t closed = report_.rounds.size();
    Report report = finish(model);
    if (report.rounds.size() > closed)  // finish() closed a last, partial round
      (callbacks::hooks::round(callbacks, report.rounds.back()), ...);
    (callbacks::hooks::end(callbacks, report), ...);
    return report;
  }

  /// Asks every worker to stop. The request travels with the next reduced buffer; the run stops
  /// at the first round end after every worker has received it (the next round, or two for
  /// Pipe-SGD), so all workers stop at the same step.
  void request_stop() noexcept { vote_ = true; }
  /// Records this worker's steps, waits and collectives into `lane` (nullptr: stop recording).
  /// Set it before begin(); see cocod/trace/timeline.hpp for the Chrome trace.
  void trace(trace::Lane* lane) noexcept { lane_ = lane; }

  /// True once a stop request of any worker has reached this worker.
  [[nodiscard]] bool stop_agreed() const noexcept { return stop_agreed_; }
  /// True if the last step() ended a round.
  [[nodiscard]] bool round_ended() const noexcept { return round_ended_; }
  [[nodiscard]] const RoundStats& last_round() const { return report_.rounds.back(); }
  /// Facts about the run; period, batch_size and weight are those of the current plan.
  [[nodiscard]] const RunInfo& info() const noexcept { return info_; }
  [[nodiscard]] const Options& options() const noexcept { return options_; }
  [[nodiscard]] const Comm& communicator() const noexcept { return comm_; }
  [[nodiscard]] std::size_t steps_taken() const noexcept { return step_; }

 protected:
  using T = scalar_type;
  using B = backend_type;
  using Span = span_type;
  using Buffer = backend::buffer<B, T>;
  static_assert(std::is_same_v<typename Buffer::span_type, Span>,
                "cocod: a backend's buffer span must be the span type of its parameters");

  ~Trainer() = default;

  Derived& self() noexcept { return static_cast<Derived&>(*this); }

  // ---- helpers for the algorithms ------------------------------------------------------

  /// The model's gradient at its current parameters, into g; returns the mean loss.
  double gradient(Model& model, std::span<const std::size_t> batch, Span g) {
    return static_cast<double>(model.loss_and_gradient(batch, g));
  }

  /// Blocking all-reduce, counted as communication and as waiting.
  void all_reduce(Span buffer) {
    const auto t0 = comm::Clock::now();
    comm_.all_reduce(buffer);
    const auto t1 = comm::Clock::now();
    const double s = seconds(t1 - t0);
    current_.comm_s += s;
    current_.wait_s += s;
    ++collectives_;
    if (lane_) {
      lane_->record(trace::Kind::all_reduce, step_, t0, t1);
      lane_->record(trace::Kind::wait, step_, t0, t1);
    }
  }
  /// Posts a non-blocking all-reduce; returns when it was posted.
  [[nodiscard]] auto post(Span buffer, typename Comm::Request& request) {
    const auto t = comm::Clock::now();
    request = comm_.all_reduce_async(buffer);
    return t;
  }
  /// Waits for a request posted at `posted`, counting the wait and the communication time.
  void await(typename Comm::Request& request, comm::Clock::time_point posted) {
    const auto t0 = comm::Clock::now();
    request.wait();
    const auto t1 = comm::Clock::now();
    current_.wait_s += seconds(t1 - t0);
    current_.comm_s += seconds(request.completed_at() - posted);
    ++collectives_;
    if (lane_) {
      lane_->record(trace::Kind::all_reduce, step_, posted, request.completed_at());
      lane_->record(trace::Kind::wait, step_, t0, t1);
    }
  }

  /// The consensus x = sum_j w_j x_j, through `buffer` (model size + control_slots), blocking.
  void average(Span x, Buffer& buffer) {
    backend::scale(B{}, buffer.first(x.size()), x, weight());
    const ControlTag tag = write_control(buffer.span());
    all_reduce(buffer.span());
    read_control(buffer.span(), tag);
    backend::copy(B{}, x, buffer.first(x.size()));
  }

  /// Slots after the model part in every reduced buffer (control_slots, + 2N when adaptive).
  [[nodiscard]] std::size_t control_size() const noexcept { return control_.size(); }

  /// Writes the control slots of a buffer about to be reduced; returns what they carry (every
  /// worker computes the same tag). A finished measurement window travels in one buffer only.
  ControlTag write_control(Span buffer) {
    std::fill(control_.begin(), control_.end(), T(0));
    control_[0] = ready_round_ == npos ? T(0) : static_cast<T>(info_.weight * ready_loss_);
    control_[1] = vote_ ? T(1) : T(0);
    ControlTag tag{ready_round_, false};
    if constexpr (adaptive) {
      if (measurement_ready_) {
        const auto r = static_cast<std::size_t>(info_.rank), n = static_cast<std::size_t>(info_.workers);
        control_[control_slots + r] = static_cast<T>(ready_sample_s_);
        control_[control_slots + n + r] = static_cast<T>(ready_collective_s_);
        measurement_ready_ = false;
        tag.measured = true;
      }
    }
    backend::store(B{}, buffer, buffer.size() - control_.size(), std::span<const T>(control_));
    return tag;
  }
  /// Reads the control slots of a reduced buffer.
  void read_control(Span buffer, ControlTag tag) {
    backend::load(B{}, buffer, buffer.size() - control_.size(), std::span<T>(control_));
    if (tag.loss_round != npos) {
      consensus_loss_ = static_cast<double>(control_[0]);
      consensus_round_ = tag.loss_round;
    }
    if (control_[1] > T(0)) stop_agreed_ = true;
    if constexpr (adaptive) {
      if (tag.measured) {
        const auto n = static_cast<std::size_t>(info_.workers);
        for (std::size_t j = 0; j < 2 * n; ++j) measured_[j] = static_cast<double>(control_[control_slots + j]);
        pending_ = schedule_.replan(options_, info_.rank, info_.workers, info_.total_batch, plan_,
                                    schedule::Measured{std::span<const double>(measured_).first(n),
                                                       std::span<const double>(measured_).subspan(n)});
        has_pending_ = true;
      }
    }
  }

  [[nodiscard]] T weight() const noexcept { return static_cast<T>(info_.weight); }
  typename Update::template State<B, T>& local_update() noexcept { return update_state_; }

  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

 private:
  static double seconds(comm::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

  Span parameters(Model& model) {
    auto x = as_span(model.parameters());
    if (running_ && x.size() != info_.parameters)
      throw std::logic_error("cocod: the model's parameter count changed during the run (" +
                             std::to_string(info_.parameters) + " -> " + std::to_string(x.size()) + ")");
    return x;
  }

  [[nodiscard]] double epochs() const {
    return info_.steps_per_epoch > 0 ? static_cast<double>(step_) / info_.steps_per_epoch : 0.0;
  }

  void mark_round_loss_ready(std::size_t steps) {
    ready_loss_ = loss_sum_ / static_cast<double>(steps);
    ready_round_ = round_;
  }

  void close_round() {
    if constexpr (adaptive) measure_round();
    current_.steps = step_in_round_;
    current_.loss = loss_sum_ / static_cast<double>(step_in_round_);
    current_.learning_rate = lr_;
    current_.epoch = epochs();
    current_.consensus_loss = consensus_loss_;
    current_.consensus_loss_round = consensus_round_;
    current_.round_s = seconds(comm::Clock::now() - round_start_);
    report_.rounds.push_back(current_);
    ++round_;
    step_in_round_ = 0;
    round_ended_ = true;
    if constexpr (adaptive) {
      if (has_pending_) apply(pending_);  // every worker at the same round boundary
    }
  }

  /// Adds the round to the measurement window; closes the window where the schedule says.
  void measure_round() {
    const std::size_t collectives = std::exchange(collectives_, 0);
    if (round_ == 0) return;  // start-up
    window_compute_s_ += current_.compute_s;
    window_samples_ += static_cast<double>(step_in_round_ * plan_.batch_size);
    window_comm_s_ += current_.comm_s;
    window_collectives_ += collectives;
    if (!schedule_.window_closes(round_)) return;
    ready_sample_s_ = window_compute_s_ / window_samples_;
    ready_collective_s_ = window_collectives_ > 0 ? window_comm_s_ / static_cast<double>(window_collectives_) : 0.0;
    measurement_ready_ = true;
    window_compute_s_ = window_samples_ = window_comm_s_ = 0.0;
    window_collectives_ = 0;
  }

  void apply(const schedule::Plan& p) {
    has_pending_ = false;
    plan_ = p;
    info_.period = p.period;
    info_.batch_size = p.batch_size;
    info_.weight = static_cast<double>(p.batch_size) / static_cast<double>(info_.total_batch);
    batch_.resize(p.batch_size);  // within the capacity reserved at set-up
  }

  void setup(Model& model) {
    if (running_) throw std::logic_error("cocod: begin() called twice without finish()");
    self().drain();
    run_start_ = comm::Clock::now();
    auto x = as_span(model.parameters());
    const int rank = comm_.rank();
    const int workers = comm_.size();
    plan_ = schedule_.plan(options_, rank, workers);
    const std::size_t samples = static_cast<std::size_t>(std::as_const(model).num_samples());

    // Agree before anything large moves: a mismatch raises the same error on every worker.
    std::array<double, 1> agree{static_cast<double>(x.size())};
    comm_.broadcast(std::span<double>(agree), 0);
    const std::size_t count0 = static_cast<std::size_t>(agree[0]);
    // Sums in double even for float models: batch and shard sizes stay exact.
    std::array<double, 4> sums{static_cast<double>(plan_.batch_size), static_cast<double>(samples),
                               count0 != x.size() ? 1.0 : 0.0, samples == 0 ? 1.0 : 0.0};
    comm_.all_reduce(std::span<double>(sums));
    if (sums[2] > 0)
      throw DistributedError("cocod: the parameter count differs between workers: rank 0 has " +
                             std::to_string(count0) + ", this worker (rank " + std::to_string(rank) +
                             ") has " + std::to_string(x.size()) + "; " +
                             std::to_string(static_cast<long>(sums[2])) + " worker(s) differ from rank 0");
    if (sums[3] > 0)
      throw DistributedError("cocod: " + std::to_string(static_cast<long>(sums[3])) +
                             " worker(s) have an empty shard (num_samples() == 0); this worker (rank " +
                             std::to_string(rank) + ") has " + std::to_string(samples) + " samples");
    comm_.broadcast(x, 0);

    info_ = RunInfo{};
    info_.algorithm = Derived::name;
    info_.rank = rank;
    info_.workers = workers;
    info_.parameters = x.size();
    info_.period = plan_.period;
    info_.batch_size = plan_.batch_size;
    info_.total_batch = static_cast<std::size_t>(sums[0]);
    info_.weight = static_cast<double>(plan_.batch_size) / sums[0];
    info_.steps_per_epoch = sums[1] / sums[0];

    sampler_ = BatchSampler(samples, options_.seed, rank);
    if constexpr (adaptive) batch_.reserve(info_.total_batch);  // the most a re-plan may assign
    batch_.assign(plan_.batch_size, 0);
    control_.assign(control_slots + (adaptive ? 2 * static_cast<std::size_t>(workers) : 0), T(0));
    measured_.assign(adaptive ? 2 * static_cast<std::size_t>(workers) : 0, 0.0);
    collectives_ = window_collectives_ = 0;
    window_compute_s_ = window_samples_ = window_comm_s_ = 0.0;
    measurement_ready_ = has_pending_ = false;
    update_state_ = update_.template start<B, T>(options_, x.size());
    self().allocate(x.size());

    step_ = round_ = step_in_round_ = 0;
    total_steps_ = 0;
    vote_ = stop_agreed_ = round_ended_ = false;
    ready_round_ = consensus_round_ = npos;
    consensus_loss_ = std::numeric_limits<double>::quiet_NaN();
    report_ = Report{};
    report_.info = info_;
    running_ = true;
    self().start(x);
  }

  Comm comm_;
  Options options_;
  Schedule schedule_;
  Update update_;

  // per run
  schedule::Plan plan_{};
  RunInfo info_{};
  BatchSampler sampler_{};
  std::vector<std::size_t> batch_;
  typename Update::template State<B, T> update_state_{};
  Report report_{};
  RoundStats current_{};
  comm::Clock::time_point run_start_{}, round_start_{};
  std::size_t step_ = 0, round_ = 0, step_in_round_ = 0, total_steps_ = 0;
  double lr_ = 0.0, loss_sum_ = 0.0, ready_loss_ = 0.0;
  double consensus_loss_ = std::numeric_limits<double>::quiet_NaN();
  std::size_t ready_round_ = npos, consensus_round_ = npos;
  bool running_ = false, vote_ = false, stop_agreed_ = false, round_ended_ = false;
  std::vector<T> control_;  // staging of the control slots (host)
  // measuring schedules
  std::vector<double> measured_;  // everybody's measurements, from the control slots
  std::size_t collectives_ = 0, window_collectives_ = 0;
  double window_compute_s_ = 0.0, window_samples_ = 0.0, window_comm_s_ = 0.0;
  double ready_sample_s_ = 0.0, ready_collective_s_ = 0.0;
  bool measurement_ready_ = false, has_pending_ = false;
  schedule::Plan pending_{};
  trace::Lane* lane_ = nullptr;
};

}  // namespace cocod::detail
