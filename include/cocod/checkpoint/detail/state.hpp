#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/checkpoint/detail/state.hpp is internal: include <cocod/checkpoint.hpp>"
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
#include "cocod/checkpoint/store.hpp"
#include "cocod/model/concepts.hpp"
#include "cocod/checkpoint/detail/archive.hpp"
#include "cocod/checkpoint/detail/settings.hpp"

namespace cocod::checkpoint::detail {

template <class Run, class Rule, class Settings>
class State {
  using Span = typename Run::Span;
  using T = typename Run::T;

 public:
  State(Run& run, Rule& rule, const Settings& settings) : run_(run), rule_(rule), settings_(settings) {}

  /// This worker's file, between rounds: what is in flight is completed first (settled, not yet
  /// handed over).
  template <class Model>
  std::vector<std::byte> save(Model& model, Span x) {
    run_.reducer().settle();
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
  std::vector<std::byte> save_own(Model& model, Span x) {
    cocod::detail::SaveArchive a;
    head(a, x);
    cocod::detail::section(a, "update", [&](auto& f) { update(f); });
    cocod::detail::section(a, "parameters", [&](auto& f) { f.span("x", x); });
    model_part(a, model);
    if constexpr (carries) cocod::detail::section(a, "carried", [&](auto& f) { rule_.serialize_carried(f); });
    return std::move(a).finish();
  }
  /// Restores every part from a file that fits this run (check()), in a run just begun.
  template <class Model>
  void load(const FileReader& file, Model& model, Span x) {
    cocod::detail::LoadArchive a(file);
    parts(a, model, x);
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
    cocod::detail::section(a, "update", [&](auto& f) { update(f); });
    if constexpr (carries) cocod::detail::section(a, "carried", [&](auto& f) { rule_.serialize_carried(f); });
  }
  /// Throws CheckpointError unless `file` (rank `rank`'s of checkpoint `c`) fits this run: its
  /// header, every setting field by field (with another number of workers, `any_workers`, the
  /// speeds may differ), and the manifest's round and step.
  void check(const FileReader& file, const CheckpointInfo& c, std::size_t parameters, bool any_workers, int rank) const {
    const Header h = read_header(file);
    check_fits(file, h, header(parameters), any_workers);
    auto f = file.fields("settings");
    std::set<std::string> ignore;
    if (h.workers != static_cast<std::uint32_t>(run_.reducer().comm().size()))  // (the epochs' steps change too)
      ignore = {"Options::speeds", "Schedule::total_steps", "Options::data_fingerprint"};  // (each old worker's own)
    SettingsCompare compare(file, f, std::move(ignore), {"Schedule::total_steps"});  // (0: a run begun without a length)
    each_setting(run_.options(), run_.update(), schedule(), settings_, compare);
    f.finish();
    const auto expected = static_cast<std::uint32_t>(rank);
    if (h.rank != expected || h.round != c.round || h.step != c.step || h.workers != static_cast<std::uint32_t>(c.workers))
      file.fail("does not match its manifest (rank " + std::to_string(h.rank) + ", round " + std::to_string(h.round) +
                ", step " + std::to_string(h.step) + "; the manifest: rank " + std::to_string(expected) + ", round " +
                std::to_string(c.round) + ", step " + std::to_string(c.step) + ")");
  }

 private:
  static constexpr bool carries = requires(Rule& r, cocod::detail::SaveArchive& a) { r.serialize_carried(a); };
  void head(cocod::detail::SaveArchive& a, Span x) {
    write_header(a.file(), header(x.size()));
    FieldWriter settings;
    SettingsWriter writer(settings);
    each_setting(run_.options(), run_.update(), schedule(), settings_, writer);
    a.file().section("settings", settings);
    // (read by progress() before the run begins, which takes it from there: no part reloads it)
    cocod::detail::section(a, "progress", [&](auto& f) { run_.loop().serialize_progress(f); });
  }
  [[nodiscard]] ScheduleSettings schedule() const { return schedule_settings(run_.schedule(), run_.loop().pos().total_steps); }
  [[nodiscard]] Header header(std::size_t parameters) const {
    const auto& comm = run_.reducer().comm();
    const auto& pos = run_.loop().pos();
    return {Rule::name, sizeof(T), static_cast<std::uint32_t>(comm.size()), static_cast<std::uint32_t>(comm.rank()),
            parameters, pos.round, pos.step, run_.loop().info().weight};
  }
  template <class Fields>
  void update(Fields& f) {
    if constexpr (requires { run_.update_state().serialize(f); })
      run_.update_state().serialize(f);
    else  // (a compile error would break optimize() for every update rule without checkpoints)
      throw std::logic_error("cocod: the Update's State cannot be checkpointed: give it a member `template <class "
                             "Archive> void serialize(Archive& a)` that names its run state, empty if it has none");
  }
  template <class Archive, class Model>
  void parts(Archive& a, Model& model, Span x) {
    using cocod::detail::section;
    section(a, "position", [&](auto& f) { run_.loop().serialize_position(f); });
    section(a, "sampler", [&](auto& f) { run_.loop().serialize_sampler(f); });
    section(a, "update", [&](auto& f) { update(f); });
    section(a, "window", [&](auto& f) { run_.window().serialize(f); });
    section(a, "votes", [&](auto& f) { run_.reducer().votes().serialize(f); });
    section(a, "guard", [&](auto& f) { run_.guard().serialize(f); });
    section(a, "report", [&](auto& f) { run_.recorder().serialize(f); });
    run_.reducer().each_exchange([&](const std::string& name, auto serialize) { section(a, "exchange." + name, serialize); });
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
