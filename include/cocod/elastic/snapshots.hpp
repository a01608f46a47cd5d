#pragma once
// A worker's states at its last round ends, in memory and in the checkpoint format (sections
// with CRC, settings compared), for elastic runs: Trainer::save(model, snapshots) keeps one
// (no collective, no file), and Trainer::resume(model, snapshots, stop) continues a run in a new
// membership epoch from round R of the plan the coordinator chose: x = the weighted average of
// the continuing workers' models at R (weights renormalized over them: only a lost worker's
// contribution goes), their step and round counters and passes over the data (an Epochs length
// counts those still due at the new number of steps a pass); the data as the new workers shard
// it; each worker keeps its own local update's state at R (its momentum or Adam moments) and what the
// algorithm carries (its serialize_carried(): an outer or anchor momentum; a newcomer takes the
// donor's); the rest of the algorithm's state (the exchanges in flight, the outer model, error
// feedback), the sampler and the schedule's plan start anew, as a resume with
// ResumeOptions::workers_may_change does from files. Only an epoch with newcomers moves the
// donor's state, as bytes and without its parameters (they get the consensus like everyone);
// each newcomer checks it against its own settings first: one with other options is refused by
// name (CheckpointError on the newcomer; elastic::Refused on the others, who go on without it).
// An epoch of continuing members only moves two doubles and the consensus.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cocod/algorithm/trainer.hpp"
#include "cocod/checkpoint/format.hpp"
#include "cocod/checkpoint/header.hpp"
#include "cocod/errors.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/checkpoint/detail/worker_file.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::elastic {

/// The members of a new epoch refused a worker whose settings differ from the run's (a newcomer
/// whose options differ from the donor's state ends with the CheckpointError naming what
/// differs; a worker whose elastic TrainOptions differ, with std::invalid_argument); they go on
/// to the next epoch without it.
class Refused : public Aborted {
 public:
  using Aborted::Aborted;
};

/// A cheap handle (copies share the states): the states of this worker's last `keep` round ends.
class Snapshots {
 public:
  /// This worker's state at one round end.
  struct Snapshot {
    std::size_t round = 0, step = 0;
    std::vector<std::byte> bytes;  // the checkpoint-format file of this worker (its sections carry CRCs)
  };
  /// Where the next resume() starts: nullopt for a fresh run; else round R, and the rank (in the
  /// new epoch) whose state the newcomers check their settings against.
  struct Plan {
    std::optional<std::size_t> round;
    int donor = 0;
    std::int64_t epoch = 0;
  };

  explicit Snapshots(std::size_t keep = 2) : data_(std::make_shared<Data>()) { data_->keep = keep < 1 ? 1 : keep; }

  void plan(Plan p) { data_->plan = p; }
  [[nodiscard]] const Plan& plan() const noexcept { return data_->plan; }
  /// The states held, oldest first.
  [[nodiscard]] const std::deque<Snapshot>& held() const noexcept { return data_->states; }
  [[nodiscard]] const Snapshot* at(std::size_t round) const noexcept {
    for (const Snapshot& s : data_->states)
      if (s.round == round) return &s;
    return nullptr;
  }
  /// Keeps `s` (replacing a state of the same round), dropping the oldest beyond `keep`.
  void add(Snapshot s) const {
    auto& q = data_->states;
    while (!q.empty() && q.back().round >= s.round) q.pop_back();
    q.push_back(std::move(s));
    while (q.size() > data_->keep) q.pop_front();
  }
  /// Drops every state (a worker that starts anew).
  void clear() const { data_->states.clear(); }

 private:
  struct Data {
    std::size_t keep = 2;
    std::deque<Snapshot> states;
    Plan plan;
  };
  std::shared_ptr<Data> data_;
};

namespace snapshot_detail {

// What a newcomer reads of the donor's state: all of it but the parameters (every worker
// computes the consensus of the members' parameters instead).
inline std::vector<std::byte> given_to_newcomers(std::span<const std::byte> own, const std::string& name) {
  const checkpoint::FileReader file(own, name);
  checkpoint::FileWriter given;
  for (const auto& section : file.sections())
    if (section.name != "parameters") given.section(section.name, section.payload);
  return std::move(given).finish();
}

template <class Run, class Rule, class Settings>
class Session {
  using Span = typename Run::Span;
  using T = typename Run::T;

 public:
  Session(const Snapshots& store, Run& run, Rule& rule, const Settings& settings)
      : store_(store), run_(run), format_(run, rule, settings) {}

  template <class Model>
  void save(Model& model) {
    const auto at = run_.header();
    store_.add({at.round, at.step, format_.save_own(model)});
  }

  template <class Model>
  Resumed resume(Model& model, const cocod::detail::BeginAt& begin, ResumeOptions) {
    const Snapshots::Plan& plan = store_.plan();
    if (!plan.round) {
      store_.clear();
      begin({});
      return {};
    }
    const std::string name = "in-memory state of round " + std::to_string(*plan.round) + " (epoch " + std::to_string(plan.epoch) + ")";
    const Snapshots::Snapshot* own = store_.at(*plan.round);
    std::optional<checkpoint::FileReader> mine;
    if (own) mine.emplace(own->bytes, name);
    Span x = cocod::detail::ModelCalls<Model>::parameters(model);
    // The donor's state moves only to an epoch with newcomers, and without its parameters.
    const std::vector<std::byte> donor_bytes = donor_state(own, plan.donor, name);
    std::optional<checkpoint::FileReader> donor;
    if (!donor_bytes.empty()) donor.emplace(donor_bytes, name);
    const checkpoint::FileReader& state = mine ? *mine : *donor;  // its own state (a newcomer: the donor's)
    const checkpoint::Header h = checkpoint::read_header(donor ? *donor : state);
    if (donor)
      check_settings(*donor, h, x.size(), plan.epoch);
    else  // (its own state, of the settings it agreed to in an earlier epoch: no collective)
      format_.check(state, {static_cast<int>(h.rank), h.round, h.step, static_cast<int>(h.workers)}, x.size(), true);
    cocod::detail::copy_in(x, consensus(mine ? &*mine : nullptr, x.size()));
    if constexpr (StatefulModel<Model>) model.load_state(state.fields("model").bytes("state"));
    // (an Epochs length: the passes still due; every worker holds the consensus: no broadcast)
    begin({format_.progress(state), static_cast<std::size_t>(h.step), true});
    format_.load_own(state);  // its own momentum and carried state
    // Dropped only now (`mine` reads its bytes): a loss during begin() leaves this worker its
    // states, so that the next epoch still finds round R held (the members that got this far
    // hold R's continuation instead; the steps agree, the next consensus averages both).
    store_.clear();
    Resumed r{true, static_cast<std::size_t>(h.round), static_cast<std::size_t>(h.step), static_cast<int>(h.workers), name};
    run_.continue_at(r, "continued from the " + name + " with " + std::to_string(run_.comm().size()) + " workers");
    return r;
  }

 private:
  // What the donor gives the workers that do not hold round R (its settings and counters, the
  // newcomers' model, update and carried state: given_to_newcomers()), as bytes, to every
  // worker; empty when every worker holds R (then only the census below moves).
  std::vector<std::byte> donor_state(const Snapshots::Snapshot* own, int donor, const std::string& name) {
    auto& comm = run_.comm();
    const bool giver = comm.rank() == donor;
    std::vector<std::byte> given = own && giver ? given_to_newcomers(own->bytes, name) : std::vector<std::byte>();
    double census[2] = {own ? 0.0 : 1.0, static_cast<double>(given.size())};  // workers without R; the bytes given
    comm.all_reduce(std::span<double>(census));
    if (census[0] == 0.0) return {};
    given.resize(static_cast<std::size_t>(census[1]));
    comm.broadcast(std::span<std::byte>(given), donor);
    if (given.empty())  // (the donor holds no state of R: every worker fails alike)
      throw CheckpointError("cocod: checkpoint " + name + " is missing: its donor (rank " + std::to_string(donor) +
                            ") holds no state of that round");
    return given;
  }
  // Each worker checks the donor's settings against its own; the outcome is agreed: the refused
  // worker throws the CheckpointError naming what differs, the others elastic::Refused.
  void check_settings(const checkpoint::FileReader& donor, const checkpoint::Header& h, std::size_t parameters,
                      std::int64_t epoch) {
    auto& comm = run_.comm();
    const auto n = static_cast<std::size_t>(comm.size());
    std::string refused;
    try {
      format_.check(donor, {static_cast<int>(h.rank), h.round, h.step, static_cast<int>(h.workers)}, parameters, true);
    } catch (const CheckpointError& e) {
      refused = e.what();
    }
    std::vector<double> flags(n, 0.0);
    flags[static_cast<std::size_t>(comm.rank())] = refused.empty() ? 0.0 : 1.0;
    comm.all_reduce(std::span<double>(flags));
    for (std::size_t j = 0; j < n; ++j)
      if (flags[j] != 0.0) {
        if (!refused.empty()) throw CheckpointError(refused);
        throw Refused("cocod::elastic: rank " + std::to_string(j) + " of epoch " + std::to_string(epoch) +
                      " was refused: its settings differ from the run's");
      }
  }
  // x = sum_j w_j x_j / sum_j w_j over the workers that hold round R (`mine`: this worker's state
  // of R; a newcomer, nullptr, adds nothing), the same bits on every worker.
  std::vector<T> consensus(const checkpoint::FileReader* mine, std::size_t parameters) {
    std::vector<T> sum(parameters + 1, T(0));
    if (mine) {
      const auto w = static_cast<T>(checkpoint::read_header(*mine).weight);
      const auto part = mine->fields("parameters").template values<T>("x", parameters);
      for (std::size_t i = 0; i < parameters; ++i) sum[i] = w * part[i];
      sum[parameters] = w;
    }
    run_.comm().all_reduce(std::span<T>(sum));
    std::vector<T> x(parameters);
    for (std::size_t i = 0; i < parameters; ++i) x[i] = sum[i] / sum[parameters];
    return x;
  }

  const Snapshots& store_;
  Run& run_;
  checkpoint::detail::WorkerFile<Run, Rule, Settings> format_;
};

}  // namespace snapshot_detail

/// The session of `store` for a trainer's run (found by argument-dependent lookup from
/// Trainer::save and Trainer::resume).
template <class Run, class Rule, class Settings>
snapshot_detail::Session<Run, Rule, Settings> checkpoint_session(const Snapshots& store, Run& run, Rule& rule,
                                                                 const Settings& settings) {
  return {store, run, rule, settings};
}

}  // namespace cocod::elastic
