#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/checkpoint/detail/worker_file.hpp is internal: include <cocod/checkpoint.hpp>"
#endif
// What one worker's checkpoint file holds, in a fixed order of sections: the header, the
// settings the run must share, the progress through the data (where a resume begins the run
// from), then each part's run state (the position, the sampler, the local update, the
// schedule's window, the votes, the guard, the report, every exchange by its name, the
// algorithm's own state, the parameters, and the model's own state), each part naming its
// fields in one serialize() that both saves and restores it.
#include <cstddef>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cocod/checkpoint/format.hpp"
#include "cocod/checkpoint/header.hpp"
#include "cocod/model/concepts.hpp"
#include "cocod/checkpoint/detail/archive.hpp"
#include "cocod/checkpoint/detail/settings.hpp"

namespace cocod::checkpoint::detail {

/// Where a saved state must be from to fit: its writer's rank, and the round, step and number
/// of workers its checkpoint's manifest (or the plan of a new membership epoch) gives.
struct Expected {
  int rank = 0;
  std::uint64_t round = 0, step = 0;
  int workers = 0;
};

template <class Run, class Rule, class Settings>
class WorkerFile {
  using Span = typename Run::Span;
  using T = typename Run::T;
  using Scope = typename Run::Scope;

 public:
  WorkerFile(Run& run, Rule& rule, const Settings& settings) : run_(run), rule_(rule), settings_(settings) {}

  /// This worker's file, between rounds: what is in flight is completed first (settled, not yet
  /// handed over).
  template <class Model>
  std::vector<std::byte> save(Model& model) {
    const Span x = cocod::detail::ModelCalls<Model>::parameters(model);
    cocod::detail::SaveArchive a;
    head(a, x);
    parts(a, model, x);
    return std::move(a).finish();
  }
  /// The part of this worker's file that a member of a new elastic epoch reads (a snapshot kept
  /// in memory at a round end): the header, the settings, the progress, the local update's
  /// state, the parameters, the model's own state and the algorithm's carried state (section
  /// "carried", load_own()). Nothing in flight is waited for: no exchange is in it.
  template <class Model>
  std::vector<std::byte> save_own(Model& model) {
    const Span x = cocod::detail::ModelCalls<Model>::parameters(model);
    cocod::detail::SaveArchive a;
    head(a, x);
    run_.serialize(a, Scope::own);
    cocod::detail::section(a, "parameters", [&](auto& f) { f.span("x", x); });
    model_part(a, model);
    if constexpr (carries) cocod::detail::section(a, "carried", [&](auto& f) { rule_.serialize_carried(f); });
    return std::move(a).finish();
  }
  /// Restores every part from a file that fits this run (check()), in a run just begun.
  template <class Model>
  void load(const FileReader& file, Model& model) {
    cocod::detail::LoadArchive a(file);
    parts(a, model, cocod::detail::ModelCalls<Model>::parameters(model));
  }
  /// How far the run of `file` had come through its data (section "progress"), where the
  /// resume begins the run from.
  static Progress progress(const FileReader& file) {
    Progress p;
    cocod::detail::LoadArchive a(file);
    cocod::detail::section(a, "progress", [&](auto& f) { cocod::detail::Loop::serialize_progress(f, p); });
    return p;
  }
  /// Restores only what a member of a new elastic epoch keeps, from a file that fits this run
  /// (save_own()'s), in a run just begun: the local update's state (its momentum or
  /// moments) and the algorithm's carried state (an outer optimizer's momentum, the progress
  /// not yet posted; the rule's serialize_carried(), where it has one).
  void load_own(const FileReader& file) {
    cocod::detail::LoadArchive a(file);
    run_.serialize(a, Scope::own);
    if constexpr (carries) cocod::detail::section(a, "carried", [&](auto& f) { rule_.serialize_carried(f); });
  }
  /// Throws CheckpointError unless `file` fits this run: its header, every setting field by
  /// field (with another number of workers, `any_workers`, the speeds may differ), and where it
  /// is from (`e`: the manifest's or the plan's rank, round, step and workers).
  void check(const FileReader& file, const Expected& e, std::size_t parameters, bool any_workers) const {
    const Header h = read_header(file);
    const auto run = run_.header();
    check_fits(file, h, header(run, parameters), any_workers);
    auto f = file.fields("settings");
    std::set<std::string> ignore;
    if (h.workers != static_cast<std::uint32_t>(run.workers))  // (the epochs' steps change too)
      ignore = {"Options::speeds", "Schedule::total_steps", "Options::data_fingerprint"};  // (each old worker's own)
    SettingsCompare compare(file, f, std::move(ignore), {"Schedule::total_steps"});  // (0: a run begun without a length)
    each_setting(run.options, run.update, schedule(run), settings_, compare);
    f.finish();
    const auto rank = static_cast<std::uint32_t>(e.rank);
    if (h.rank != rank || h.round != e.round || h.step != e.step || h.workers != static_cast<std::uint32_t>(e.workers))
      file.fail("does not match its manifest (rank " + std::to_string(h.rank) + ", round " + std::to_string(h.round) +
                ", step " + std::to_string(h.step) + "; the manifest: rank " + std::to_string(rank) + ", round " +
                std::to_string(e.round) + ", step " + std::to_string(e.step) + ")");
  }

 private:
  static constexpr bool carries = requires(Rule& r, cocod::detail::SaveArchive& a) { r.serialize_carried(a); };
  void head(cocod::detail::SaveArchive& a, Span x) {
    const auto run = run_.header();
    write_header(a.file(), header(run, x.size()));
    FieldWriter settings;
    SettingsWriter writer(settings);
    each_setting(run.options, run.update, schedule(run), settings_, writer);
    a.file().section("settings", settings);
    // (read by progress() before the run begins, which takes it from there: no part reloads it)
    Progress p = run.progress;
    cocod::detail::section(a, "progress", [&](auto& f) { cocod::detail::Loop::serialize_progress(f, p); });
  }
  template <class RunHeader>
  static ScheduleSettings schedule(const RunHeader& run) { return schedule_settings(run.schedule, run.total_steps); }
  template <class RunHeader>
  static Header header(const RunHeader& run, std::size_t parameters) {
    return {Rule::name, sizeof(T), static_cast<std::uint32_t>(run.workers), static_cast<std::uint32_t>(run.rank),
            parameters, run.round, run.step, run.weight};
  }
  template <class Archive, class Model>
  void parts(Archive& a, Model& model, Span x) {
    using cocod::detail::section;
    run_.serialize(a);  // the run's own parts: position, sampler, update, window, votes, guard, report, exchanges
    // After the exchanges: loading, the algorithm checks that what they hold fits it.
    section(a, "algorithm", [&](auto& f) { rule_.serialize(f); });
    section(a, "parameters", [&](auto& f) { f.span("x", x); });
    model_part(a, model);
  }
  template <class Archive, class Model>
  void model_part(Archive& a, Model& model) {
    if constexpr (StatefulModel<Model>) {
      cocod::detail::section(a, "model", [&](auto& f) {
        if constexpr (Archive::saving) {
          std::vector<std::byte> state;
          std::as_const(model).save_state(state);
          f.bytes("state", state);
        } else {
          model.load_state(f.bytes("state"));
        }
      });
    }
  }

  Run& run_;
  Rule& rule_;
  const Settings& settings_;
};

}  // namespace cocod::checkpoint::detail
