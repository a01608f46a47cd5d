#pragma once
// The run API every algorithm shares (optimize, or begin / next_batch / step / finish), and the
// base an algorithm derives from. The data path is a short loop over parts that each own their
// run state: the sampler, the local update, the schedule's window, the control slots, the
// exchanges in flight, the clock and report. An algorithm says only what it does with
// communication; see docs/extending.md for writing one.
#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "cocod/callbacks/hooks.hpp"
#include "cocod/checkpoint/store.hpp"
#include "cocod/report.hpp"
#include "cocod/schedule/fixed.hpp"
#include "cocod/stop.hpp"
#include "cocod/trace/timeline.hpp"
#include "cocod/update/sgd.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/algorithm/detail/run.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod {

/// How resume() treats a checkpoint written by another number of workers.
struct ResumeOptions {
  /// false: such a checkpoint is refused (CheckpointError naming both numbers). true: the run
  /// continues from the checkpoint's consensus model (sum_j w_j x_j of the saved workers) and
  /// its step and round counters, with the data as the new workers shard it; momentum, anchors,
  /// the sampler, the schedule's plan and the report start anew (docs/reliability.md).
  bool workers_may_change = false;
};

/// The base of every algorithm (CRTP: `Derived` is the algorithm) and the run API its users
/// call. The algorithm supplies, as members the base may call (make the base a friend):
///
///     static constexpr const char* name;                    // "CoCoD-SGD", shown in reports
///     void allocate(std::size_t n);                          // its buffers, for n parameters
///     double compute(Model&, Span x, batch, T lr);          // the step's gradient and local work
///
/// and where it needs them (the base's defaults do nothing):
///
///     void start(Span x);                 // after x was broadcast from rank 0
///     void communicate(Span x, T lr);     // the step's communication, after its loss is counted
///     void end_round(Span x);             // at the end of every full round
///     void finish_run(Span x);            // at the end of the run: leave the consensus in x
///
/// with the protected helpers of detail::Run (gradient, update, prepare, post / await, reduce,
/// average, weight): see docs/extending.md.
///
/// \tparam Derived  the algorithm.
/// \tparam Model    a cocod::Model.
/// \tparam Comm     a cocod::comm::Communicator.
/// \tparam Schedule decides k, M_i and the learning rate (schedule::Fixed<lr::...>, schedule::Adaptive<...>).
/// \tparam Update   the local update (update::Sgd: momentum, Nesterov, weight decay).
template <class Derived, class Model, class Comm, class Schedule, class Update>
class Trainer : public detail::Run<Model, Comm, Schedule, Update> {
  using Run = detail::Run<Model, Comm, Schedule, Update>;

 public:
  using model_type = Model;
  using communicator_type = Comm;
  using scalar_type = typename Run::T;
  using backend_type = typename Run::B;
  /// std::span<T> for host parameters, backend::device_span<T> for device parameters.
  using span_type = typename Run::Span;
  /// True when the schedule measures and re-plans (batch sizes, period) during the run.
  static constexpr bool adaptive = Run::measuring;

  /// Validates options and schedule (std::invalid_argument naming the field) against the
  /// communicator's size.
  Trainer(Comm comm, Options options, Schedule schedule = {}, Update update = {})
      : Run(std::move(comm), std::move(options), std::move(schedule), std::move(update)) {
    detail::Accepts accepts{};
    if constexpr (requires { Derived::accepts; }) accepts = Derived::accepts;
    this->check_family(Derived::name, accepts);
  }
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Runs until `stop` (Epochs{e}, Steps{n} or Rounds{n}) or until a callback asks to stop,
  /// then finishes: `model` holds the consensus, the same on every worker. Callbacks are
  /// detected at compile time: on_begin(const RunInfo&), on_step(const StepInfo&),
  /// on_round(const RoundStats&), on_end(const Report&); a hook returning true asks to stop.
  template <class Stop, class... Callbacks>
  Report optimize(Model& model, const Stop& stop, Callbacks&&... callbacks) {
    static_assert(StopCondition<Stop>, "cocod: optimize(model, stop) says when to stop with cocod::Epochs{e}, "
                                       "cocod::Steps{n} or cocod::Rounds{n}");
    if constexpr (StopCondition<Stop>) {
      if (resume_from_) {
        resume(model, resume_from_->first, stop, resume_from_->second);
        resume_from_.reset();  // (kept when the resume failed: a retry resumes again)
      } else {
        begin(model, stop);
      }
      try {
        (callbacks::hooks::begin(callbacks, this->info_), ...);
        // A run resumed from the round end where its stop was agreed stops there, as it did.
        bool stopping = this->pos_.round_ended && stop_agreed();
        while (!stopping && this->pos_.step < this->pos_.total_steps) {
          const double loss = advance(model, this->parameters(model, "step"), next_batch());
          bool stop_asked = false;
          const StepInfo s{this->pos_.step - 1, loss, this->pos_.learning_rate};
          ((stop_asked |= callbacks::hooks::step(callbacks, s)), ...);
          if (this->pos_.round_ended) ((stop_asked |= callbacks::hooks::round(callbacks, last_round())), ...);
          if (stop_asked) request_stop();
          // Late hooks see the round with every vote of its hooks recorded (a checkpoint saves them).
          if (this->pos_.round_ended) (callbacks::hooks::after_round(callbacks, last_round()), ...);
          stopping = this->pos_.round_ended && stop_agreed();
        }
        if (stopping) this->recorder_.stopped_early();
      } catch (...) {  // a callback's failure (a checkpoint that cannot be written) ends the run
        this->abandon();
        throw;
      }
      const std::size_t closed = this->recorder_.closed();
      Report report = finish(model);
      if (report.rounds_dropped + report.rounds.size() > closed)  // finish() closed a last, partial round
        (callbacks::hooks::round(callbacks, report.rounds.back()), ...);
      (callbacks::hooks::end(callbacks, report), ...);
      return report;
    }
  }

  /// Step-level API. Starts a run of unknown length; every worker must call it. It agrees on
  /// the parameter count (DistributedError on every worker if they differ), broadcasts rank 0's
  /// parameters and computes the weights w_i. Then: next_batch() and step() until you stop,
  /// and finish().
  void begin(Model& model) {
    this->setup(model, Derived::name, [&](std::size_t n) { self().allocate(n); },
                [&](span_type x) { self().start(x); });
    if constexpr (requires(Model& m) { m.buffers(); } && !BufferedModel<Model>) {
      static_assert(model_requirements::always_false<Model>,
                    "cocod::BufferedModel: the model's buffers() must return one contiguous buffer of the parameters' "
                    "scalar and memory space, by reference or as a view (std::span<T>, cocod::device_span<T>), not an "
                    "owning container by value");
    } else if constexpr (BufferedModel<Model>) {
      try {
        this->start_buffers(as_span(model.buffers()));
      } catch (...) {
        this->abandon();
        throw;
      }
    }
  }
  /// Starts a run whose length is given by Epochs, Steps or Rounds (info().total_steps).
  template <class Stop>
  void begin(Model& model, const Stop& stop) {
    static_assert(StopCondition<Stop>, "cocod: begin(model, stop) takes cocod::Epochs{e}, cocod::Steps{n} or "
                                       "cocod::Rounds{n}");
    begin(model);
    if constexpr (StopCondition<Stop>) {
      try {
        this->set_length(stop.steps(this->info_.steps_per_epoch, this->plan_.period));
      } catch (...) {  // a bad length (Steps{0}): no run
        this->abandon();
        throw;
      }
    }
  }

  // ---- checkpoints ------------------------------------------------------------------------------

  /// Saves the run into `store`, as the checkpoint of the current round: every worker calls it
  /// at the same round boundary (once round_ended(), or before the first step). Each worker
  /// writes its own file atomically; once all have, rank 0 writes the manifest and removes
  /// checkpoints beyond the store's keep. A failure on any worker (a full disk) is a
  /// CheckpointError on every worker, and the previous checkpoint stays complete.
  void save(Model& model, const Checkpoints& store) {
    auto x = this->parameters(model, "save");
    if (this->pos_.step_in_round != 0)
      throw std::logic_error("cocod: save() between rounds only: call it once round_ended() is true, or before the first step");
    this->control_.checkpoint_taken();  // before the state is saved: a resumed run must not take it again
    this->write_checkpoint(store, [&] { return this->save_state(model, x, serializer()); });
  }

  /// Starts a run like begin(model, stop), but from the newest complete checkpoint in `store`,
  /// so that it continues exactly where that run was; every worker calls it. Returns false, and
  /// starts at step 0 like begin(), when the store holds no checkpoint. A checkpoint that does
  /// not fit (another algorithm, scalar type, parameter count, number of workers, options) or
  /// is damaged (truncated, corrupt, a file missing) is a CheckpointError on every worker that
  /// names the file and what differs; nothing is written. Give the same stop as the saved run
  /// for a bitwise continuation (the learning-rate schedule depends on the run's length).
  template <class Stop>
  bool resume(Model& model, const Checkpoints& store, const Stop& stop, ResumeOptions options = {}) {
    static_assert(StopCondition<Stop>, "cocod: resume(model, store, stop) takes cocod::Epochs{e}, cocod::Steps{n} or "
                                       "cocod::Rounds{n}");
    const auto found = this->find_checkpoint(store);
    if (!found) {
      begin(model, stop);
      return false;
    }
    if (found->workers != this->comm_.size()) {
      this->elastic_start(model, *found, options.workers_may_change, Derived::name, [&] { begin(model, stop); });
      return true;
    }
    std::vector<std::byte> bytes;
    std::optional<checkpoint::FileReader> file;
    this->agreed([&] {
      bytes = Checkpoints::read_file(*found, this->comm_.rank());
      file.emplace(bytes, found->file(this->comm_.rank()).string());
      this->check_file(*file, *found, this->parameters_of(model), Derived::name, false);
    });
    begin(model, stop);
    this->agreed([&] { this->load_state(*file, model, this->parameters(model, "resume"), serializer()); },
                 [&] { this->abandon(); });
    return true;
  }
  /// The next optimize() resumes from `store` (see resume()) instead of starting at step 0.
  void resume_from(const Checkpoints& store, ResumeOptions options = {}) { resume_from_.emplace(store, options); }

  /// This worker's next mini-batch of sample indices from its deterministic sampler (valid until
  /// the next call). Its size is the plan's M_i, which an adaptive schedule changes between rounds.
  [[nodiscard]] std::span<const std::size_t> next_batch() { return this->draw(); }

  /// One local step on `batch` (indices in [0, num_samples()); std::out_of_range otherwise), and
  /// at the k-th step of a round the round's end. Every worker calls step the same number of
  /// times. Returns this worker's mini-batch loss.
  double step(Model& model, std::span<const std::size_t> batch) {
    auto x = this->parameters(model, "step");
    this->check_batch(batch);
    return advance(model, x, batch);
  }

  /// Ends the run: finishes a partial round, waits for communication in flight and leaves the
  /// consensus model (the same on every worker) in `model`. Returns this worker's report.
  /// A failure here (a NonFiniteError of the final average) ends the run all the same.
  Report finish(Model& model) {
    auto x = this->parameters(model, "finish");
    try {
      if (this->pos_.step_in_round != 0) average_model_buffers(model);  // (a full round averaged them at its end)
      this->close_partial_round();
      self().finish_run(x);
    } catch (...) {
      this->abandon();
      throw;
    }
    return this->end_run();
  }

  /// Asks every worker to stop. The request travels with the next reduced buffer; the run stops
  /// at the first round end after every worker has received it (the next round, or two for
  /// Pipe-SGD), so all workers stop at the same step. In a loop of your own: stop once
  /// round_ended() && stop_agreed(), then call finish().
  void request_stop() noexcept { this->control_.vote(); }
  /// Asks every worker to checkpoint: the request travels like a stop request, and once
  /// checkpoint_agreed() is true (at the same round end on every worker) each worker calls
  /// save(). callbacks::Checkpoint does this for a time interval.
  void request_checkpoint() noexcept { this->control_.vote_checkpoint(); }
  /// True once a checkpoint request of any worker has reached this worker and save() has not
  /// been called since.
  [[nodiscard]] bool checkpoint_agreed() const noexcept { return this->control_.state().checkpoint_agreed; }
  /// Records this worker's steps, waits and collectives into `lane` (nullptr: stop recording).
  /// Set it before begin(); see cocod/trace/timeline.hpp for the Chrome trace.
  void trace(trace::Lane* lane) noexcept { this->recorder_.trace(lane); }

  /// True once a stop request of any worker has reached this worker.
  [[nodiscard]] bool stop_agreed() const noexcept { return this->control_.state().stop_agreed; }
  /// True if the last step() ended a round.
  [[nodiscard]] bool round_ended() const noexcept { return this->pos_.round_ended; }
  /// The statistics of the last round that ended (after round_ended()).
  [[nodiscard]] const RoundStats& last_round() const {
    if (this->recorder_.report().rounds.empty()) throw std::logic_error("cocod: last_round() before a round ended");
    return this->recorder_.report().rounds.back();
  }
  /// Facts about the run; period, batch_size and weight are those of the current plan.
  [[nodiscard]] const RunInfo& info() const noexcept { return this->info_; }
  [[nodiscard]] const Options& options() const noexcept { return this->options_; }
  [[nodiscard]] const Comm& communicator() const noexcept { return this->comm_; }
  [[nodiscard]] std::size_t steps_taken() const noexcept { return this->pos_.step; }

 protected:
  ~Trainer() = default;

  // The defaults of the optional members: nothing to do.
  void start(span_type) {}
  void communicate(span_type, scalar_type) {}
  void end_round(span_type) {}
  void finish_run(span_type) {}
  // An algorithm that does not say what its run state is cannot be checkpointed: saving or
  // resuming it is an error at run time (a CheckpointError naming it on every worker), so that
  // an algorithm without checkpoints still compiles with optimize().
  template <class Archive>
  void serialize(Archive&) {
    throw std::logic_error(std::string("cocod: ") + Derived::name +
                           " cannot be checkpointed: give it a member `template <class Archive> void serialize(Archive& a)` "
                           "that names its run state (empty if it has none)");
  }

 private:
  Derived& self() noexcept { return static_cast<Derived&>(*this); }
  // An algorithm names its run state in `template <class Archive> void serialize(Archive& a)`
  // (a("anchor", anchor_); ...; empty if it has none), private like its other hooks.
  auto serializer() {
    return [this](auto& archive) { self().serialize(archive); };
  }
  std::optional<std::pair<Checkpoints, ResumeOptions>> resume_from_;

  double advance(Model& model, span_type x, std::span<const std::size_t> batch) {
    return this->run_step([&](scalar_type lr) { return self().compute(model, x, batch, lr); },
                          [&](scalar_type lr) { self().communicate(x, lr); }, [&] {
                            self().end_round(x);
                            average_model_buffers(model);
                          });
  }
  void average_model_buffers(Model& model) {
    if constexpr (BufferedModel<Model>) this->average_buffers(as_span(model.buffers()));
  }
};

}  // namespace cocod
