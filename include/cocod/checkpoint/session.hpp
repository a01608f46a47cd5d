#pragma once
// A run's checkpoint session, the opt-in part of a trainer that needs the file system: the
// save() and resume() of cocod::Trainer reach it by argument-dependent lookup on the store type,
// so <cocod.hpp> itself pulls in no POSIX header. Saving writes every worker's file into the
// store and agrees on the outcome; resuming finds the newest complete checkpoint, checks that it
// fits, and restores every part.
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cocod/algorithm/trainer.hpp"
#include "cocod/checkpoint/format.hpp"
#include "cocod/checkpoint/header.hpp"
#include "cocod/checkpoint/store.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/checkpoint/detail/agreed.hpp"
#include "cocod/checkpoint/detail/worker_file.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::checkpoint {

template <class Run, class Rule, class Settings>
class Session {
  using Span = typename Run::Span;
  using T = typename Run::T;

 public:
  Session(const Checkpoints& store, Run& run, Rule& rule, const Settings& settings)
      : store_(store), run_(run), format_(run, rule, settings) {}

  /// Writes this worker's file into the checkpoint of the current round and, once every worker
  /// has written its own (agreed in one all-reduce), rank 0 writes the manifest; a failure on
  /// any worker is a CheckpointError on every worker, and the previous checkpoint stays whole.
  template <class Model>
  void save(Model& model) {
    const auto t0 = std::chrono::steady_clock::now();
    auto& comm = run_.comm();
    const auto n = static_cast<std::size_t>(comm.size()), rank = static_cast<std::size_t>(comm.rank());
    const auto at = run_.header();
    CheckpointInfo c{store_.folder(at.round), Rule::name, at.round, at.step, comm.size(), {}};
    // A manifest already in this round's folder (a second save at one boundary, an older run in
    // the directory) would vouch for files about to be replaced: it goes first, and nobody
    // writes before it is gone.
    detail::agreed(comm, unknown("saved"), [&] {
      if (rank == 0) Checkpoints::retract(c.folder);
    });
    std::vector<double> table(2 * n, 0.0);  // per worker: file size, CRC-32
    detail::agreed(comm, table, unknown("saved"), [&] {
      const std::vector<std::byte> data = format_.save(model);
      Checkpoints::make_folder(c.folder);
      Checkpoints::write_atomically(c.folder / Checkpoints::file_name(comm.rank()), data);
      table[rank] = static_cast<double>(data.size());
      table[n + rank] = static_cast<double>(crc32(data));
    }, [] {});
    for (std::size_t j = 0; j < n; ++j)
      c.files.push_back({Checkpoints::file_name(static_cast<int>(j)), static_cast<std::uint64_t>(table[j]),
                         static_cast<std::uint32_t>(table[n + j])});
    detail::agreed(comm, unknown("saved"), [&] {  // nobody goes on before the manifest is there
      if (rank == 0) store_.commit(c);
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char text[96];
    std::snprintf(text, sizeof text, ", %.3f MB (this worker's file) in %.3f s", table[rank] / 1e6, seconds);
    run_.emit({.kind = Event::Kind::checkpoint_written, .message = "checkpoint written: " + c.folder.string() + text,
               .path = c.folder.string(), .bytes = table[rank], .seconds = seconds});
  }

  /// Starts the run from the newest complete checkpoint: begin() starts it (so that the run's
  /// length, counted from the checkpoint's progress through the data, is known to the check),
  /// the checkpoint is checked against the run, then every part is restored. Nothing to resume
  /// from, after begin(), when the store holds none. See Trainer::resume() (which abandons the
  /// run begun when this throws).
  template <class Model>
  Resumed resume(Model& model, const cocod::detail::BeginAt& begin, ResumeOptions options) {
    auto& comm = run_.comm();
    const auto found = find();
    if (!found) {
      begin({});
      return {};
    }
    if (found->workers != comm.size()) {
      elastic(model, *found, options.workers_may_change, begin);
      return resumed(*found);
    }
    std::vector<std::byte> bytes;
    std::optional<FileReader> file;
    Progress from;  // (the run's length counts from it)
    std::vector<double> none;
    detail::agreed(comm, none, unknown("read"), [&] {
      bytes = Checkpoints::read_file(*found, comm.rank());
      file.emplace(bytes, found->file(comm.rank()).string());
      from = format_.progress(*file);
    }, [] {});
    begin({from, static_cast<std::size_t>(found->step)});
    detail::agreed(comm, none, unknown("resumed"), [&] {
      format_.check(*file, expected(*found, comm.rank()), ModelParameters::of(model), false);
    }, [] {});
    detail::agreed(comm, none, unknown("resumed"), [&] { format_.load(*file, model); }, [] {});
    return resumed(*found);
  }

 private:
  // The run goes on from checkpoint c (its round and step): its report says so.
  Resumed resumed(const CheckpointInfo& c) {
    Resumed r{true, static_cast<std::size_t>(c.round), static_cast<std::size_t>(c.step), c.workers, c.folder.string()};
    const std::size_t total = run_.header().total_steps;
    run_.continue_at(r, "resumed from " + r.folder + " (round " + std::to_string(r.round) + ", step " + std::to_string(r.step) +
                            ", written by " + std::to_string(r.workers) + " workers)" +
                            (r.step >= total && total > 0 ? ": the run had ended there" : ""));
    return r;
  }
  // What rank `rank`'s file of checkpoint c must say of itself.
  static detail::Expected expected(const CheckpointInfo& c, int rank) { return {rank, c.round, c.step, c.workers}; }
  struct ModelParameters {
    template <class Model>
    static std::size_t of(Model& model) {
      return cocod::detail::ModelCalls<Model>::parameters(model).size();
    }
  };
  std::string unknown(const char* what) const {
    return std::string("cocod: checkpoint ") + store_.directory().string() + ": this worker's state could not be " + what +
           " (an exception of unknown type)";
  }

  /// The newest complete checkpoint in the store, the same on every worker (or none on all); a
  /// manifest that cannot be read, a file it lists that is missing or of the wrong size, or
  /// workers that see different checkpoints: CheckpointError on every worker.
  std::optional<CheckpointInfo> find() {
    auto& comm = run_.comm();
    const auto n = static_cast<std::size_t>(comm.size());
    std::optional<CheckpointInfo> found;
    std::vector<double> table(n, 0.0);  // per worker: 1 + the round of its checkpoint, 0 for none
    detail::agreed(comm, table, unknown("read"), [&] {
      found = store_.latest();
      if (!found) return;
      Checkpoints::check_files(*found);
      table[static_cast<std::size_t>(comm.rank())] = static_cast<double>(found->round) + 1.0;
    }, [] {});
    const std::vector<double>& rounds = table;  // (summed with the failure flags)
    auto seen = [&](std::size_t j) { return rounds[j] == 0.0 ? std::string("none") : "round " + std::to_string(static_cast<std::size_t>(rounds[j]) - 1); };
    for (std::size_t j = 1; j < n; ++j)
      if (rounds[j] != rounds[0])
        throw CheckpointError("cocod: the workers see different checkpoints (rank 0: " + seen(0) + ", rank " +
                              std::to_string(j) + ": " + seen(j) + "): every worker must name the same directory");
    return found;
  }

  /// Starts a run from checkpoint `c` of another number of workers: x = sum_j w_j x_j over the
  /// saved workers (in rank order, the same on every new worker), their step and round
  /// counters (resumed() sets them), and the passes over the data done (an Epochs length counts
  /// those still due); everything else starts anew.
  template <class Model>
  void elastic(Model& model, const CheckpointInfo& c, bool allowed, const cocod::detail::BeginAt& begin) {
    auto& comm = run_.comm();
    Span x = cocod::detail::ModelCalls<Model>::parameters(model);
    std::vector<T> consensus(x.size(), T(0));
    std::vector<std::byte> model_state;
    Header first{};
    Progress from;
    detail::agreed(comm, unknown("resumed"), [&] {
      if (!allowed)
        throw CheckpointError("cocod: checkpoint " + c.folder.string() + " does not fit this run: the number of workers differs (checkpoint: " +
                              std::to_string(c.workers) + ", this run: " + std::to_string(comm.size()) +
                              "); to continue from its consensus model with the new number, resume with workers_may_change = true");
      for (int j = 0; j < c.workers; ++j) {
        const auto bytes = Checkpoints::read_file(c, j);
        const FileReader file(bytes, c.file(j).string());
        format_.check(file, expected(c, j), x.size(), true);
        const Header h = read_header(file);
        if (j == 0) {
          first = h;
          from = format_.progress(file);
        }
        const auto w = static_cast<T>(h.weight);
        const auto part = file.fields("parameters").template values<T>("x", x.size());
        for (std::size_t i = 0; i < x.size(); ++i) consensus[i] = j == 0 ? w * part[i] : consensus[i] + w * part[i];
        if constexpr (StatefulModel<Model>)
          if (j == comm.rank() % c.workers) {
            const auto s = file.fields("model").bytes("state");
            model_state.assign(s.begin(), s.end());
          }
      }
    });
    cocod::detail::copy_in(x, consensus);
    if constexpr (StatefulModel<Model>) model.load_state(std::span<const std::byte>(model_state));
    begin({from, static_cast<std::size_t>(first.step), true});  // (every worker computed the same consensus)
  }

  const Checkpoints& store_;
  Run& run_;
  detail::WorkerFile<Run, Rule, Settings> format_;
};

/// The session of `store` for a trainer's run (found by argument-dependent lookup from
/// Trainer::save and Trainer::resume).
template <class Run, class Rule, class Settings>
Session<Run, Rule, Settings> checkpoint_session(const Checkpoints& store, Run& run, Rule& rule, const Settings& settings) {
  return Session<Run, Rule, Settings>(store, run, rule, settings);
}

}  // namespace cocod::checkpoint
