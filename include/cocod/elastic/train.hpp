#pragma once
// Elastic training: a worker of a run whose membership changes while it trains. Each membership
// epoch is a comm::Gloo among its members and a trainer on it; the worker keeps its state at
// its last round ends in memory (elastic::Snapshots). When a peer is lost, every survivor's
// collective fails (cocod::PeerLost), the coordinator forms the next epoch of the survivors
// (and of waiting workers), and each continues from the latest round they all hold (at most
// the round in flight is lost). A waiting worker is admitted at a round end the members agree
// on (a vote in the control slots, as a checkpoint request is). Link cocod::gloo.
//
//     cocod::elastic::Member member({.coordinator = "node0:29500"});
//     const cocod::Report report = cocod::elastic::train<cocod::CoCoDSGD<Model, cocod::comm::Gloo>>(
//         member, {}, model, cocod::Epochs{10},
//         [&](auto& opt, cocod::comm::Gloo comm, Model&) { opt.emplace(comm, options); });
//
// For a fixed membership nothing changes: the iterates are those of the same trainer on
// comm::Gloo (or comm::Threads). With changes, a run is reproducible given its membership log:
// TrainOptions::script replays its changes (each "epoch e starts: round R" of the log) at the
// same rounds, with the same bits.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cocod/comm/gloo.hpp"
#include "cocod/elastic/membership.hpp"
#include "cocod/elastic/snapshots.hpp"
#include "cocod/errors.hpp"
#include "cocod/report.hpp"

namespace cocod::elastic {

struct TrainOptions {
  /// The address the peers reach this worker at (comm::GlooOptions::hostname).
  std::string hostname{};
  /// A collective that waits this long for a peer throws (comm::GlooOptions::stall_timeout).
  std::chrono::milliseconds stall_timeout = std::chrono::seconds(300);
  /// How long to wait for the coordinator to form an epoch this worker belongs to.
  std::chrono::milliseconds epoch_timeout = std::chrono::seconds(600);
  /// Keep the state every this many round ends (1: a lost worker costs at most the round in
  /// flight; each snapshot completes the exchange in flight first).
  std::size_t snapshot_every = 1;
  /// Scripted membership changes (a replay of a log): at the end of each of these rounds (counted
  /// as rounds completed, as the log's "starts: round R") every member ends its epoch, so that
  /// the coordinator forms the next one there, with the workers that wait then. With a script,
  /// waiting workers are admitted only there (not at the next agreed round end).
  std::set<std::size_t> script{};
  /// This worker leaves the run once this many rounds completed (a scripted leave).
  std::optional<std::size_t> leave_after_round{};
  /// Called at every round end with (trainer, epoch); e.g. a progress line, or a chance to fail.
  std::function<void(const RoundStats&, const Epoch&)> on_round{};
};

/// What an elastic worker did: its report of the last epoch it trained in (nullopt when it left
/// by script), how many epochs it took part in, and the coordinator's log when it ended.
struct TrainResult {
  std::optional<Report> report;
  std::int64_t epochs = 0;
  std::string log;
};

namespace train_detail {
inline std::string digest_of(const Snapshots::State& s) { return "step" + std::to_string(s.step); }
}  // namespace train_detail

/// Trains `model` as a worker of the elastic run `member` joined, until `stop`: the trainer of
/// each epoch is built by construct(std::optional<Trainer>&, comm::Gloo, Model&) (emplace it; it
/// may also give the model the data shard of its rank among the epoch's workers: the
/// parameters are then set from the state the epoch continues from). Returns
/// when the run ended (every member holds the same final consensus), or when this worker left
/// by script. Throws Expelled if the coordinator expelled this worker, CommunicationError when
/// the coordinator is gone, and any failure that is not a lost peer (a peer's own error ends
/// every worker, as in comm::Gloo).
template <class Trainer, class Model, class Stop, class Construct>
TrainResult train(Member& member, const TrainOptions& o, Model& model, const Stop& stop, Construct&& construct) {
  Snapshots snapshots;
  TrainResult result;
  std::int64_t after = 0;
  for (;;) {
    Epoch epoch;
    try {
      epoch = member.next_epoch(after, o.epoch_timeout);
    } catch (const RunFinished&) {  // it ended before this worker was admitted
      result.log = member.log();
      return result;
    }
    after = epoch.number;
    ++result.epochs;
    std::vector<std::pair<std::int64_t, std::string>> held;
    for (const auto& s : snapshots.held()) held.emplace_back(static_cast<std::int64_t>(s.round), train_detail::digest_of(s));
    try {
      member.settle_start(epoch, held, o.epoch_timeout);
    } catch (const Superseded&) {  // a member was lost before it started: the next one
      continue;
    }
    Snapshots::Plan plan{};
    plan.epoch = epoch.number;
    if (epoch.round) {
      plan.round = static_cast<std::size_t>(*epoch.round);
      for (std::size_t i = 0; i < epoch.members.size(); ++i)
        if (epoch.members[i] == epoch.donor) plan.donor = static_cast<int>(i);
    }
    snapshots.plan(plan);
    comm::GlooOptions g;
    g.store = member.store().address();
    g.rank = epoch.rank;
    g.size = epoch.size();
    g.prefix = epoch.gloo_prefix();
    g.hostname = o.hostname;
    g.stall_timeout = o.stall_timeout;
    struct Unwatch {
      Member& m;
      ~Unwatch() { m.unwatch(); }
    } unwatch{member};
    try {
      comm::Gloo comm(g);
      member.watch(epoch.number, [comm]() mutable { comm.abort(); });
      std::optional<Trainer> opt;
      construct(opt, comm, model);
      opt->resume(model, snapshots, stop);
      bool ended_epoch = false, asked = false;
      while (opt->steps_taken() < opt->info().total_steps) {
        member.check();
        opt->step(model, opt->next_batch());
        if (!opt->round_ended()) continue;
        const std::size_t round = opt->last_round().round + 1;  // rounds completed, as the log counts them
        if (o.on_round) o.on_round(opt->last_round(), epoch);
        const bool scripted = o.script.count(round) > 0 || o.leave_after_round == std::optional<std::size_t>(round);
        const bool agreed = opt->checkpoint_agreed();  // (save() takes it)
        if (agreed || scripted || round % o.snapshot_every == 0) opt->save(model, snapshots);
        if (o.leave_after_round == std::optional<std::size_t>(round)) {
          member.leave();
          result.log = member.log();
          return result;  // this worker's connections close: the coordinator forms the next epoch
        }
        if (agreed || scripted) {
          member.ask_switch(epoch.number);
          ended_epoch = true;
          break;
        }
        if (epoch.rank == 0 && !asked && o.script.empty() && member.waiting() > 0) {
          opt->request_checkpoint();  // agreed at a later round end on every member
          asked = true;
        }
      }
      if (ended_epoch) continue;
      result.report = opt->finish(model);
      member.finish();
      result.log = member.log();
      return result;
    } catch (const PeerLost&) {  // a peer is gone: the next epoch continues without it
    } catch (const Refused&) {   // a newcomer was refused: the next epoch goes on without it
    } catch (const Aborted& e) {  // a collective stalled on a member the coordinator expelled meanwhile
      if (dynamic_cast<const DistributedError*>(&e) || !member.replaced(epoch.number)) throw;
    }
  }
}

}  // namespace cocod::elastic
