#pragma once
// The run API every algorithm shares (optimize, or begin / next_batch / step / finish), over
// the algorithm's rule. A rule says only what a worker does with communication, through the
// operations it receives in each hook (docs/extending.md); the trainer owns the run's parts.
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "cocod/algorithm/operations.hpp"
#include "cocod/callbacks/hooks.hpp"
#include "cocod/report.hpp"
#include "cocod/schedule/fixed.hpp"
#include "cocod/stop.hpp"
#include "cocod/trace/timeline.hpp"
#include "cocod/update/sgd.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/algorithm/detail/begin_point.hpp"
#include "cocod/algorithm/detail/parts.hpp"
#include "cocod/algorithm/detail/rule_checks.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod {

/// How resume() treats a checkpoint written by another number of workers.
struct ResumeOptions {
  /// false: such a checkpoint is refused (CheckpointError naming both numbers). true: the run
  /// continues from the checkpoint's consensus model (sum_j w_j x_j of the saved workers) and
  /// its step and round counters, with the data as the new workers shard it; momentum, anchors,
  /// the sampler, the schedule's plan and the report start anew (docs/reliability.md). An
  /// Epochs length keeps the passes over the data: the passes still due from the checkpoint's.
  bool workers_may_change = false;
};

/// An algorithm and the run API its users call: cocod::CoCoDSGD, SyncSGD, LocalSGD, PipeSGD and
/// OverlapLocalSGD are trainers of their rules, and so is an algorithm of one's own.
///
/// \tparam Rule     the algorithm's rule, `template <class Ops> class Rule` (docs/extending.md).
/// \tparam Model    a cocod::Model.
/// \tparam Comm     a cocod::comm::Communicator.
/// \tparam Schedule decides k, M_i and the learning rate (schedule::Fixed<lr::...>, schedule::Adaptive<...>).
/// \tparam Update   the local update (update::Sgd: momentum, Nesterov, weight decay).
template <template <class> class Rule, class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
class Trainer {
  using Run = detail::Run<Model, Comm, Schedule, Update>;

 public:
  using model_type = Model;
  using communicator_type = Comm;
  using schedule_type = Schedule;
  using update_type = Update;
  using operations_type = Operations<Model, Comm, Schedule, Update>;
  using rule_type = Rule<operations_type>;
  using scalar_type = typename operations_type::scalar_type;
  using backend_type = typename operations_type::backend_type;
  /// std::span<T> for host parameters, backend::device_span<T> for device parameters.
  using span_type = typename operations_type::span_type;
  /// The settings of the algorithm's own it takes besides Options, Schedule and Update.
  using settings_type = typename detail::settings_of<rule_type>::type;
  /// True when the schedule measures and re-plans (batch sizes, period) during the run.
  static constexpr bool adaptive = Run::measuring;
  /// The algorithm's name, as reports and checkpoints show it ("CoCoD-SGD").
  static constexpr const char* name = detail::RuleChecks<rule_type, operations_type>::name();

  /// Validates the options and every setting (std::invalid_argument naming the field) against
  /// the communicator. After the options come, in any order, the Schedule, the Update and the
  /// algorithm's own settings (for CoCoD-SGD: Outer, Compress, Fragments, OverlapDepth), each at most once.
  template <class... Parts>
    requires(detail::taken_by_the_algorithm<std::remove_cvref_t<Parts>, Schedule, Update, settings_type> && ...)
  explicit Trainer(Comm comm, Options options, Parts&&... parts)
      : Trainer(sorted{}, std::move(comm), std::move(options),
                detail::Parts<Schedule, Update, settings_type>::sort(std::forward<Parts>(parts)...)) {}
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
        resume_from_(model, [&](const detail::BeginPoint& at) { begin_at(model, stop, at); });
        resume_from_ = nullptr;  // (kept when the resume failed: a retry resumes again)
      } else {
        begin(model, stop);
      }
      const auto& pos = run_.loop().pos();
      try {
        (callbacks::hooks::begin(callbacks, info()), ...);
        // A run resumed from the round end where its stop was agreed stops there, as it did.
        bool stopping = pos.round_ended && stop_agreed();
        while (!stopping && pos.step < pos.total_steps) {
          const double loss = advance(model, run_.parameters(model, "step"), next_batch());
          bool stop_asked = false;
          const StepInfo s{pos.step - 1, loss, pos.learning_rate};
          ((stop_asked |= callbacks::hooks::step(callbacks, s)), ...);
          if (pos.round_ended) ((stop_asked |= callbacks::hooks::round(callbacks, last_round())), ...);
          if (stop_asked) request_stop();
          // Late hooks see the round with every vote of its hooks recorded (a checkpoint saves them).
          if (pos.round_ended) (callbacks::hooks::after_round(callbacks, last_round()), ...);
          stopping = pos.round_ended && stop_agreed();
        }
      } catch (...) {  // a callback's failure (a checkpoint that cannot be written) ends the run
        run_.abandon();
        throw;
      }
      const std::size_t closed = run_.recorder().closed();
      Report report = finish(model);
      if (report.rounds_dropped + report.rounds.size() > closed)  // finish() closed a last, partial round
        (callbacks::hooks::round(callbacks, report.rounds.back()), ...);
      (callbacks::hooks::end(callbacks, report), ...);
      return report;
    } else {
      return Report{};  // (never compiled into a program: the static_assert above fails first)
    }
  }

  /// Step-level API. Starts a run of unknown length; every worker must call it. It agrees on
  /// the parameter count (DistributedError on every worker if they differ), broadcasts rank 0's
  /// parameters and computes the weights w_i. Then: next_batch() and step() until you stop,
  /// and finish().
  void begin(Model& model) { start(model, true); }
  /// Starts a run whose length is given by Epochs, Steps or Rounds (info().total_steps).
  template <class Stop>
  void begin(Model& model, const Stop& stop) {
    static_assert(StopCondition<Stop>, "cocod: begin(model, stop) takes cocod::Epochs{e}, cocod::Steps{n} or cocod::Rounds{n}");
    begin_at(model, stop, {});
  }

  /// Saves the run into `store` (a cocod::Checkpoints, from <cocod/checkpoint.hpp>), as the
  /// checkpoint of the current round: every worker calls it at the same round boundary (once
  /// round_ended(), or before the first step). A failure on any worker (a full disk) is a
  /// CheckpointError on every worker, and the previous checkpoint stays complete.
  template <class Store>
  void save(Model& model, const Store& store) {
    (void)run_.parameters(model, "save");
    if (run_.loop().pos().step_in_round != 0)
      throw std::logic_error("cocod: save() between rounds only: call it once round_ended() is true, or before the first step");
    run_.reducer().votes().checkpoint_taken();  // before the state is saved: a resumed run must not take it again
    session(store).save(model);
  }
  /// Starts a run like begin(model, stop), but from the newest complete checkpoint in `store`,
  /// so that it continues exactly where that run was; every worker calls it. Returns where it
  /// resumed from (its round, step, folder; the report's `resumed` says the same), or, converting
  /// to false, that the store holds no checkpoint: the run then starts at step 0 like begin().
  /// A checkpoint that does not fit (another algorithm, scalar type, parameter count, number of
  /// workers, settings, schedule, run length) or is damaged is a CheckpointError on every worker
  /// that names the file and what differs.
  template <class Store, class Stop>
  Resumed resume(Model& model, const Store& store, const Stop& stop, ResumeOptions options = {}) {
    static_assert(StopCondition<Stop>, "cocod: resume(model, store, stop) takes cocod::Epochs{e}, cocod::Steps{n} or "
                                       "cocod::Rounds{n}");
    try {
      return session(store).resume(model, [&](const detail::BeginPoint& at) { begin_at(model, stop, at); }, options);
    } catch (...) {  // (a run begun from a state that does not fit, or whose event sink failed, ends)
      run_.abandon();
      throw;
    }
  }
  /// Tells `sink` what the run decides as it happens (cocod::Event: resumed, a checkpoint
  /// written, a plan re-made from measurements, a reduction skipped), one event per decision on
  /// each worker; cocod::events::Printer prints them one line each. None by default.
  void on_event(EventSink sink) { run_.on_event(std::move(sink)); }
  /// The next optimize() resumes from `store` (see resume()) instead of starting at step 0.
  template <class Store>
  void resume_from(const Store& store, ResumeOptions options = {}) {
    resume_from_ = [this, store, options](Model& model, const detail::BeginAt& begin) {
      (void)session(store).resume(model, begin, options);
    };
  }

  /// This worker's next mini-batch of sample indices from its deterministic sampler (valid until
  /// the next call). Its size is the plan's M_i, which an adaptive schedule changes between rounds.
  [[nodiscard]] std::span<const std::size_t> next_batch() { return run_.loop().draw(); }
  /// One local step on `batch` (indices in [0, num_samples()); std::out_of_range otherwise), and
  /// at the k-th step of a round the round's end. Every worker calls step the same number of
  /// times. Returns this worker's mini-batch loss.
  double step(Model& model, std::span<const std::size_t> batch) {
    auto x = run_.parameters(model, "step");
    run_.loop().check_batch(batch);
    return advance(model, x, batch);
  }
  /// Ends the run: finishes a partial round, waits for communication in flight and leaves the
  /// consensus model (the same on every worker) in `model`. Returns this worker's report.
  /// A failure here (a NonFiniteError of the final average) ends the run all the same.
  Report finish(Model& model) {
    auto x = run_.parameters(model, "finish");
    return run_.finish(model, [&] {
      operations_type ops{run_, model};
      if constexpr (hooks) rule_.finish(ops, x);
    });
  }

  /// At a round's end: this worker's share of the consensus into `out` (as long as the
  /// parameters); the average of the shares, weighted by info().weight, is the model finish()
  /// would leave now. The parameters themselves unless the rule says otherwise (DelayedDiLoCo).
  void consensus_share(Model& model, span_type out) {
    auto x = run_.parameters(model, "consensus_share");
    if (out.size() != x.size())
      invalid_setting("cocod: consensus_share()", "out", "must have " + std::to_string(x.size()) + " values, one a parameter", out.size());
    operations_type ops{run_, model};
    if constexpr (requires { rule_.consensus_share(ops, x, out); }) rule_.consensus_share(ops, x, out);
    else backend::copy(backend_type{}, out, x);
  }

  /// Asks every worker to stop. The request travels with the next reduced buffer; the run stops
  /// at the first round end after every worker has received it (the next round, or two for
  /// Pipe-SGD), so all workers stop at the same step. In a loop of your own: stop once
  /// round_ended() && stop_agreed(), then call finish().
  void request_stop() noexcept { run_.reducer().votes().vote(); }
  /// Asks every worker to checkpoint: the request travels like a stop request, and once
  /// checkpoint_agreed() is true (at the same round end on every worker) each worker calls
  /// save(). callbacks::Checkpoint does this for a time interval.
  void request_checkpoint() noexcept { run_.reducer().votes().vote_checkpoint(); }
  /// True once a checkpoint request of any worker has reached this worker and save() has not been called since.
  [[nodiscard]] bool checkpoint_agreed() const noexcept { return run_.reducer().votes().state().checkpoint_agreed; }
  /// True once a stop request of any worker has reached this worker.
  [[nodiscard]] bool stop_agreed() const noexcept { return run_.reducer().votes().state().stop_agreed; }
  /// Records this worker's steps, waits and collectives into `lane` (nullptr: stop recording).
  /// Set it before begin(); see cocod/trace/timeline.hpp for the Chrome trace.
  void trace(trace::Lane* lane) noexcept { run_.recorder().trace(lane); }

  /// True if the last step() ended a round.
  [[nodiscard]] bool round_ended() const noexcept { return run_.loop().pos().round_ended; }
  /// The statistics of the last round that ended (after round_ended()).
  [[nodiscard]] const RoundStats& last_round() const {
    if (run_.recorder().report().rounds.empty()) throw std::logic_error("cocod: last_round() before a round ended");
    return run_.recorder().report().rounds.back();
  }
  /// Facts about the run; period, batch_size and weight are those of the current plan.
  [[nodiscard]] const RunInfo& info() const noexcept { return run_.loop().info(); }
  [[nodiscard]] const Options& options() const noexcept { return run_.options(); }
  /// The algorithm's own settings, as validated.
  [[nodiscard]] const settings_type& settings() const noexcept { return settings_; }
  [[nodiscard]] const Comm& communicator() const noexcept { return run_.reducer().comm(); }
  [[nodiscard]] std::size_t steps_taken() const noexcept { return run_.loop().pos().step; }

 private:
  // Every hook of the rule is there (else one error names the missing one, and no call follows).
  static constexpr bool hooks = detail::RuleChecks<rule_type, operations_type>::ok;
  struct sorted {};
  Trainer(sorted, Comm comm, Options options, detail::Parts<Schedule, Update, settings_type> parts)
      : run_(std::move(comm), std::move(options), std::move(parts.schedule), std::move(parts.update)),
        settings_(std::move(parts.settings)),
        rule_(detail::make_rule<rule_type, typename Run::CommImpl>(settings_)) {}
  void start(Model& model, bool broadcast) {  // begin(model); no broadcast when all hold the same
    run_.setup(model, name, broadcast, [&](span_type x) {
      operations_type ops{run_, model};
      if constexpr (hooks) rule_.begin(ops, x);
    });
  }
  // begin(model, stop) for a run that continues at `at` (a resume's): an Epochs length counts
  // the passes still due from there.
  template <class Stop>
  void begin_at(Model& model, const Stop& stop, const detail::BeginPoint& at) {
    start(model, !at.agreed);
    if constexpr (StopCondition<Stop>) {
      try {
        run_.loop().continue_from(at.progress, at.step);
        if constexpr (requires { stop.steps_from(at.progress); })
          run_.set_length(stop.steps_from(run_.loop().progress()));
        else
          run_.set_length(stop.steps(info().steps_per_epoch, run_.loop().plan().period));
      } catch (...) {  // a bad length (Steps{0}): no run
        run_.abandon();
        throw;
      }
    }
  }
  // The checkpoint session of `store` (found by argument-dependent lookup in <cocod/checkpoint.hpp>).
  template <class Store>
  auto session(const Store& store) {
    return checkpoint_session(store, run_, rule_, settings_);
  }
  double advance(Model& model, span_type x, std::span<const std::size_t> batch) {
    return run_.step(
        model,
        [&](scalar_type lr) {
          operations_type ops{run_, model};
          if constexpr (hooks) rule_.step(ops, x, batch, lr);
        },
        [&] {
          operations_type ops{run_, model};
          if constexpr (hooks) rule_.end_round(ops, x);
        });
  }

  Run run_;
  settings_type settings_;
  rule_type rule_;
  std::function<void(Model&, const detail::BeginAt&)> resume_from_;
};

}  // namespace cocod
