#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/run_state.hpp is internal: include <cocod.hpp>"
#endif
// The parts of a run and the state they hold: the options, the schedule and its measurement
// window, the local update and its state, the loop (position, plan, sampler), the reducer
// (communicator, control slots, exchanges), the non-finite guard, the recorder and the events.
// A checkpoint or a new membership epoch reads and writes that state through five members:
// comm(), header(), serialize(), continue_at() and emit(); the parts themselves are for the run's
// loop (detail::Run), the trainer and the operations an algorithm receives.
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "cocod/algorithm/detail/emitter.hpp"
#include "cocod/algorithm/detail/guard.hpp"
#include "cocod/algorithm/detail/loop.hpp"
#include "cocod/algorithm/detail/recorder.hpp"
#include "cocod/algorithm/detail/reducer.hpp"
#include "cocod/algorithm/detail/reduction_context.hpp"
#include "cocod/algorithm/detail/run_checks.hpp"
#include "cocod/events.hpp"
#include "cocod/options.hpp"
#include "cocod/report.hpp"
#include "cocod/schedule/measurement.hpp"
#include "cocod/stop.hpp"

namespace cocod {
template <template <class> class Rule, class Model, class Comm, class Schedule, class Update>
class Trainer;
template <class Model, class Comm, class Schedule, class Update>
class Operations;
}  // namespace cocod

namespace cocod::detail {

template <class Model, class Comm, class Schedule, class Update>
class RunState {
  using Checks = RunChecks<Model, Comm>;

 public:
  using CommImpl = typename Checks::communicator;
  using T = typename model_types<Model>::scalar;
  using B = typename model_types<Model>::backend;
  using Span = typename model_types<Model>::span;
  using UpdateState = typename Update::template State<B, T>;
  static constexpr bool measuring = schedule::measuring_schedule<Schedule>;

  /// Validates the options and the schedule (std::invalid_argument naming the field).
  RunState(Comm comm, Options options, Schedule schedule, Update update)
      : options_(std::move(options)),
        schedule_(std::move(schedule)),
        update_(std::move(update)),
        guard_(options_.non_finite, options_.max_skips),
        reducer_(Checks::make(std::move(comm)), guard_, recorder_) {
    options_.validate(reducer_.comm().size());
    schedule_.validate();
    if constexpr (requires { update_.validate(); }) update_.validate();
  }

  [[nodiscard]] CommImpl& comm() noexcept { return reducer_.comm(); }
  /// What a saved state says of the run it comes from: where it is, and the settings it shares.
  struct Header {
    int rank, workers;
    std::size_t round, step, total_steps;
    double weight;
    Progress progress;
    const Options& options;
    const Schedule& schedule;
    const Update& update;
  };
  [[nodiscard]] Header header() const {
    const Position& pos = loop_.pos();
    return {reducer_.comm().rank(), reducer_.comm().size(), pos.round, pos.step, pos.total_steps,
            loop_.info().weight, loop_.progress(), options_, schedule_, update_};
  }
  /// all: every part's state; own: the local update's alone (what a worker keeps into a new
  /// membership epoch).
  enum class Scope { all, own };
  /// The run state of every part, each in its section (what is in flight is completed first):
  /// the position, the sampler, the local update, the schedule's window, the votes, the guard,
  /// the report and every exchange by its name; or the local update's alone (Scope::own).
  template <class Archive>
  void serialize(Archive& a, Scope scope = Scope::all) {
    auto part = [&](std::string_view name, auto&& fields) {
      a.begin(name);
      fields(a);
      a.end();
    };
    auto update = [&](auto& f) {
      if constexpr (requires { update_state_.serialize(f); })
        update_state_.serialize(f);
      else  // (a compile error would break optimize() for every update rule without checkpoints)
        throw std::logic_error("cocod: the Update's State cannot be checkpointed: give it a member `template <class "
                               "Archive> void serialize(Archive& a)` that names its run state, empty if it has none");
    };
    if (scope == Scope::own) return part("update", update);
    if constexpr (Archive::saving) reducer_.settle();
    part("position", [&](auto& f) { loop_.serialize_position(f); });
    part("sampler", [&](auto& f) { loop_.serialize_sampler(f); });
    part("update", update);
    part("window", [&](auto& f) { window_.serialize(f); });
    part("votes", [&](auto& f) { reducer_.votes().serialize(f); });
    part("guard", [&](auto& f) { guard_.serialize(f); });
    part("report", [&](auto& f) { recorder_.serialize(f); });
    reducer_.each_exchange([&](const std::string& name, auto fields) { part("exchange." + name, fields); });
  }
  /// The run just begun goes on from `r` (its round and step); its report and an event say so.
  void continue_at(const Resumed& r, std::string message) {
    loop_.pos().step = r.step;
    loop_.pos().round = r.round;
    recorder_.resumed(r);
    emit({.kind = Event::Kind::resumed, .message = std::move(message), .path = r.folder});
  }
  /// Tells `e` to the sink, with this worker's rank, round and step.
  void emit(Event e) const { events_.emit(std::move(e), loop_.info().rank, loop_.pos()); }

 protected:
  template <template <class> class, class, class, class, class>
  friend class cocod::Trainer;
  template <class, class, class, class>
  friend class cocod::Operations;

  [[nodiscard]] const Options& options() const noexcept { return options_; }
  [[nodiscard]] const Schedule& schedule() const noexcept { return schedule_; }
  [[nodiscard]] Update& update() noexcept { return update_; }
  [[nodiscard]] UpdateState& update_state() noexcept { return update_state_; }
  [[nodiscard]] Loop& loop() noexcept { return loop_; }
  [[nodiscard]] const Loop& loop() const noexcept { return loop_; }
  [[nodiscard]] Reducer<CommImpl, B, T>& reducer() noexcept { return reducer_; }
  [[nodiscard]] const Reducer<CommImpl, B, T>& reducer() const noexcept { return reducer_; }
  [[nodiscard]] Guard& guard() noexcept { return guard_; }
  [[nodiscard]] schedule::Window<Schedule>& window() noexcept { return window_; }
  [[nodiscard]] Recorder& recorder() noexcept { return recorder_; }
  [[nodiscard]] const Recorder& recorder() const noexcept { return recorder_; }
  /// What the reducer reads of the run at each reduction.
  [[nodiscard]] ReductionContext<Schedule, T> context() noexcept { return {loop_, window_, schedule_, options_}; }

  Options options_;
  Schedule schedule_;
  Update update_;
  UpdateState update_state_{};
  Recorder recorder_{};
  Guard guard_;
  Loop loop_{};
  schedule::Window<Schedule> window_{};
  Reducer<CommImpl, B, T> reducer_;
  Emitter events_{};
};

}  // namespace cocod::detail
