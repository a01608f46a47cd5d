#pragma once
// Elastic training: a worker of a run whose membership changes while it trains. Each membership
// epoch is a comm::Gloo among its members and a trainer on it; the worker keeps its state at
// its last round ends in memory (elastic::Snapshots). When a peer is lost, every survivor's
// collective fails (cocod::PeerLost), the coordinator forms the next epoch of the survivors
// (and of waiting workers), and each continues from the latest round they all hold (at most
// two rounds are lost: the one in flight, and the one before when its exchange did not reach
// every survivor). A loss while the members of a new epoch connect ends that set-up: the
// survivors go on to the next epoch. A waiting worker is admitted at a round end the members agree
// on (a vote in the control slots, as a checkpoint request is). Link cocod::gloo.
//
//     cocod::elastic::Member member({.coordinator = "node0:29500"});
//     const auto result = cocod::elastic::train<cocod::CoCoDSGD<Model, cocod::comm::Gloo>>(
//         member, {}, cocod::Epochs{10}, [&](int rank, int workers) { return Model{shard(rank, workers)}; },
//         [&](auto& opt, cocod::comm::Gloo comm) { opt.emplace(comm, options); });
//     // result.model: the final consensus; result.report: this worker's report
//
// For a fixed membership nothing changes: the iterates are those of the same trainer on
// comm::Gloo (or comm::Threads). With changes, a run is reproducible given its membership log:
// TrainOptions::script replays its changes (each "epoch e starts: round R" of the log) at the
// same rounds, with the same bits.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iterator>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/checkpoint.hpp"
#include "cocod/comm/gloo.hpp"
#include "cocod/elastic/membership.hpp"
#include "cocod/elastic/result.hpp"
#include "cocod/elastic/snapshots.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/elastic/detail/agreement.hpp"
#include "cocod/elastic/detail/epoch_ends.hpp"
#include "cocod/elastic/detail/train_options.hpp"
#undef COCOD_INTERNAL_INCLUDE
#include "cocod/errors.hpp"
#include "cocod/options.hpp"
#include "cocod/report.hpp"
#include "cocod/stop.hpp"

namespace cocod::elastic {

namespace train_detail {
// An epoch whose connections cannot be set up is followed by another; the failure of this many
// in a row ends the worker with the error (a peer it can never reach).
inline constexpr int kMaxFailedSetups = 3;
// What the members of an epoch must agree on about a round they hold: its step count (their
// states themselves differ, each worker's own).
inline std::string position_of(const Snapshots::State& s) { return "step" + std::to_string(s.step); }
// A worker that ends with an error of its own (its settings refused) first tells the
// coordinator it leaves, so that the others need not wait for its connection to close.
inline void leave_quietly(Member& member) noexcept {
  try {
    member.leave("with its settings refused");
  } catch (...) {  // (the coordinator gone: the error being thrown says more)
  }
}
struct NoHook {
  template <class... A>
  void operator()(A&&...) const noexcept {}
};
}  // namespace train_detail

/// Trains as a worker of the elastic run `member` joined, until `stop`. Each epoch, the model is
/// make(rank, workers) (its data shard among the epoch's workers; its parameters then come from the
/// state the epoch continues from) and the trainer is built by construct(std::optional<Trainer>&,
/// comm::Gloo) (emplace it). on_round(stats, epoch, model) is called at every round end (a progress
/// line, a curve's point). Returns when the run ended (every member holds the same final
/// consensus), when this worker left by script, or when the run ended before it was admitted.
/// Throws Expelled if the coordinator expelled this worker, CommunicationError when the coordinator
/// is gone (TrainOptions::checkpoints then holds the newest checkpoint to resume from),
/// std::invalid_argument naming a TrainOptions field that cannot be used (snapshot_every 0, resume
/// without checkpoints) or a setting that differs from the run's (checkpoints, checkpoint_every,
/// resume, snapshot_every, Options::period, non_finite and max_skips, the stop: the others go on without
/// this worker), CheckpointError for a checkpoint that does not fit, CommunicationError after
/// three epochs in a row whose connections could not be set up, and any failure that is not a
/// lost peer (a peer's own error ends every worker, as in comm::Gloo).
template <class Trainer, class Stop, class MakeModel, class Construct, class OnRound = train_detail::NoHook>
auto train(Member& member, const TrainOptions& o, const Stop& stop, MakeModel&& make, Construct&& construct,
           OnRound&& on_round = {}) {
  using Model = std::remove_cvref_t<std::invoke_result_t<MakeModel&, int, int>>;
  if (o.snapshot_every == 0) invalid_setting("cocod::elastic::TrainOptions", "snapshot_every", "must be >= 1", 0);
  if (o.checkpoints && o.checkpoint_every == 0)
    invalid_setting("cocod::elastic::TrainOptions", "checkpoint_every", "must be >= 1 with checkpoints", 0);
  if (o.resume && !o.checkpoints)
    invalid_setting("cocod::elastic::TrainOptions", "resume", "needs checkpoints (the directory to resume from)", "true");
  Snapshots snapshots;
  TrainResult<Model> result;
  std::optional<Model>& model = result.model;
  std::int64_t after = 0;
  std::size_t reached = 0;  // the steps this worker had taken when its last epoch ended
  bool trained = false;     // it began an epoch (a run that finishes without it then is its failure)
  int failed_setups = 0;    // epochs in a row whose connections could not be set up
  detail::Lap lap;
  detail::Retired retired;          // the communicators of past epochs, closing
  std::optional<comm::Gloo> last;   // the last epoch's (its only handle once its trainer is gone)
  EpochStart began;     // how the epoch being begun began (summed over those that failed before a round end)
  bool timed = true;    // the last epoch reached a round end: the next one is timed from its end
  for (;;) {
    retired.add(last);  // (closed while the next epoch forms)
    if (std::exchange(timed, false)) {
      began = {};
      began.since_unix = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      (void)lap();
    }
    Epoch epoch;
    try {
      epoch = member.next_epoch(after, o.epoch_timeout);
    } catch (const RunFinished& e) {  // it ended before this worker was admitted: nothing to do
      if (trained) throw DistributedError(std::string(e.what()) + ", after it trained: it holds no final model");
      result.log = member.log();
      return result;
    }
    after = epoch.number;
    ++result.epochs;
    began.epoch = epoch.number;
    began.formed += lap();
    std::vector<std::pair<std::int64_t, std::string>> held;
    for (const auto& s : snapshots.held()) held.emplace_back(static_cast<std::int64_t>(s.round), train_detail::position_of(s));
    try {
      member.settle_start(epoch, held, o.epoch_timeout);
    } catch (const Superseded&) {  // a member was lost before it started: the next one
      continue;
    }
    trained = true;
    began.agreed += lap();
    Snapshots::Plan plan{};
    plan.epoch = epoch.number;
    if (epoch.round) {
      plan.round = static_cast<std::size_t>(*epoch.round);
      for (std::size_t i = 0; i < epoch.members.size(); ++i)
        if (epoch.members[i] == epoch.donor) plan.donor = static_cast<int>(i);
    }
    snapshots.plan(plan);
    comm::GlooOptions g;
    g.rank = epoch.rank;
    g.size = epoch.size();
    g.prefix = member.gloo_prefix(epoch.number);
    g.hostname = o.hostname;
    g.stall_timeout = o.stall_timeout;
    struct Unwatch {
      Member& m;
      ~Unwatch() { m.unwatch(); }
    } unwatch{member};
    try {
      // (watched from the set-up on: a member lost while the members connect ends it)
      auto abort = std::make_shared<comm::GlooAbort>();
      member.watch(epoch.number, [abort] { abort->abort(); });
      std::optional<comm::Gloo> connected;
      try {
        connected.emplace(g, member.shared_store(), abort);
        last = *connected;
        failed_setups = 0;
        began.connected += lap();
      } catch (const CommunicationError& e) {  // most often a member lost while it connected
        began.connected += lap();
        result.losses.emplace_back(e.what());
        if (member.replaced(epoch.number)) continue;  // (its peers had moved on: not this worker's failure)
        if (++failed_setups >= train_detail::kMaxFailedSetups) throw;
        member.ask_switch(epoch.number);  // the next epoch, of whoever is left
        continue;
      }
      comm::Gloo comm = *connected;
      std::optional<Trainer> opt;  // (declared after the model: it goes first)
      model.reset();
      model.emplace(make(epoch.rank, epoch.size()));
      began.made += lap();
      construct(opt, comm);
      Resumed from;
      try {
        detail::agree_settings(comm, detail::agreed_settings(o, opt->options(), stop),
                               epoch.round ? std::optional<int>(plan.donor) : std::nullopt, epoch.number);
        if (!epoch.round && o.resume) {
          snapshots.clear();
          from = opt->resume(*model, *o.checkpoints, stop, {.workers_may_change = true});
        } else {
          from = opt->resume(*model, snapshots, stop);
        }
      } catch (const std::invalid_argument&) {  // this worker's settings were refused
        train_detail::leave_quietly(member);
        throw;
      } catch (const CheckpointError&) {  // the state does not fit this worker's settings
        train_detail::leave_quietly(member);
        throw;
      }
      if (reached > from.step) result.steps_redone += reached - from.step;
      reached = from.step;
      // Every member, a newcomer too, holds the state it continues from: a loss before the
      // first round end of this epoch continues from there again, not from step 0.
      if (from) opt->save(*model, snapshots);
      began.continued += lap();
      bool ended_epoch = false, asked = false;
      while (opt->steps_taken() < opt->info().total_steps) {
        member.check();
        opt->step(*model, opt->next_batch());
        reached = opt->steps_taken();
        if (!opt->round_ended()) continue;
        const std::size_t round = opt->last_round().round + 1;  // rounds completed, as the log counts them
        if (!timed) {
          began.first_round += lap();
          result.starts.push_back(began);
          timed = true;
        }
        on_round(opt->last_round(), epoch, *model);
        const bool scripted = o.script.count(round) > 0 || o.leave_after_round == std::optional<std::size_t>(round);
        const bool agreed = opt->checkpoint_agreed();  // (save() takes it)
        if (agreed || scripted || round % o.snapshot_every == 0) opt->save(*model, snapshots);
        if (o.checkpoints && round % o.checkpoint_every == 0) opt->save(*model, *o.checkpoints);
        if (o.leave_after_round == std::optional<std::size_t>(round)) {
          member.leave();
          model.reset();
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
      result.report = opt->finish(*model);
      member.finish();
      result.log = member.log();
      return result;
    } catch (const PeerLost& e) {  // a peer is gone: the next epoch continues without it (and a new model)
      result.losses.emplace_back(e.what());
    } catch (const Refused& e) {  // a worker's settings were refused: the next epoch goes on without it
      result.losses.emplace_back(e.what());
    } catch (const Aborted& e) {  // a collective stalled on a member the coordinator expelled meanwhile
      if (!member.replaced(epoch.number)) throw;
      result.losses.emplace_back(e.what());
    }
  }
}

}  // namespace cocod::elastic
