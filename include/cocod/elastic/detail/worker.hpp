#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/elastic/detail/worker.hpp is internal: include <cocod/elastic/train.hpp>"
#endif
// An elastic worker's run (elastic::train), one membership epoch after another, each in named
// steps: formed by the coordinator, its starting round settled, its members connected, the run
// continued from that round, trained to its end.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/checkpoint.hpp"
#include "cocod/comm/gloo.hpp"
#include "cocod/elastic/detail/agreement.hpp"
#include "cocod/elastic/detail/epoch_ends.hpp"
#include "cocod/elastic/detail/train_options.hpp"
#include "cocod/elastic/membership.hpp"
#include "cocod/elastic/result.hpp"
#include "cocod/elastic/snapshots.hpp"
#include "cocod/errors.hpp"

namespace cocod::elastic {

namespace train_detail {
// An epoch whose connections cannot be set up is followed by another; the failure of this many
// in a row ends the worker with the error (a peer it can never reach).
inline constexpr int kMaxFailedSetups = 3;
// What the members of an epoch must agree on about a round they hold: its step count (their
// states themselves differ, each worker's own).
inline std::string position_of(const Snapshots::Snapshot& s) { return "step" + std::to_string(s.step); }
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

// An elastic worker's run (see the top of this file).
template <class Trainer, class Stop, class MakeModel, class Construct, class OnRound>
class Worker {
 public:
  using Model = std::remove_cvref_t<std::invoke_result_t<MakeModel&, int, int>>;

  Worker(Member& member, const TrainOptions& o, const Stop& stop, MakeModel& make, Construct& construct, OnRound& on_round)
      : member_(member), o_(o), stop_(stop), make_(make), construct_(construct), on_round_(on_round) {}

  TrainResult<Model> run() {
    for (;;) {
      retired_.add(last_);  // (closed while the next epoch forms)
      time_next_start();
      std::optional<Epoch> epoch = form();
      if (!epoch) return std::move(result_);
      if (!settle(*epoch)) continue;
      const Snapshots::Plan plan = plan_of(*epoch);
      snapshots_.plan(plan);
      struct Unwatch {
        Member& m;
        ~Unwatch() { m.unwatch(); }
      } unwatch{member_};
      try {
        std::optional<comm::Gloo> comm = connect(*epoch);
        if (!comm) continue;
        if (train_epoch(*epoch, plan, *comm) == Ended::run) return std::move(result_);
      } catch (const PeerLost& e) {  // a peer is gone: the next epoch continues without it (and a new model)
        result_.losses.emplace_back(e.what());
      } catch (const Refused& e) {  // a worker's settings were refused: the next epoch goes on without it
        result_.losses.emplace_back(e.what());
      } catch (const Aborted& e) {  // a collective stalled on a member the coordinator expelled meanwhile
        if (!member_.replaced(epoch->number)) throw;
        result_.losses.emplace_back(e.what());
      }
    }
  }

 private:
  enum class Ended { epoch, run };  // the epoch (a switch asked for), or this worker's run

  // The last epoch reached a round end: the next one is timed from now.
  void time_next_start() {
    if (!std::exchange(timed_, false)) return;
    began_ = {};
    began_.since_unix = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    (void)lap_();
  }
  // The next epoch the coordinator forms; nullopt when the run ended before this worker was
  // admitted (nothing to do).
  std::optional<Epoch> form() {
    Epoch epoch;
    try {
      epoch = member_.next_epoch(after_, o_.epoch_timeout);
    } catch (const RunFinished& e) {
      if (trained_) throw DistributedError(std::string(e.what()) + ", after it trained: it holds no final model");
      result_.log = member_.log();
      return std::nullopt;
    }
    after_ = epoch.number;
    ++result_.epochs;
    began_.epoch = epoch.number;
    began_.formed += lap_();
    return epoch;
  }
  // Reports the rounds this worker holds and waits for the round the epoch starts from (set in
  // `epoch`); false when a member was lost before it started (the next epoch).
  bool settle(Epoch& epoch) {
    std::vector<std::pair<std::int64_t, std::string>> held;
    for (const auto& s : snapshots_.held()) held.emplace_back(static_cast<std::int64_t>(s.round), position_of(s));
    try {
      member_.settle_start(epoch, held, o_.epoch_timeout);
    } catch (const Superseded&) {
      return false;
    }
    trained_ = true;
    began_.agreed += lap_();
    return true;
  }
  static Snapshots::Plan plan_of(const Epoch& epoch) {
    Snapshots::Plan plan{};
    plan.epoch = epoch.number;
    if (epoch.round) {
      plan.round = static_cast<std::size_t>(*epoch.round);
      for (std::size_t i = 0; i < epoch.members.size(); ++i)
        if (epoch.members[i] == epoch.donor) plan.donor = static_cast<int>(i);
    }
    return plan;
  }
  // The epoch's comm::Gloo, watched from the set-up on (a member lost while the members connect
  // ends it); nullopt when the set-up failed: the next epoch, of whoever is left.
  std::optional<comm::Gloo> connect(const Epoch& epoch) {
    comm::GlooOptions g;
    g.rank = epoch.rank;
    g.size = epoch.size();
    g.prefix = member_.gloo_prefix(epoch.number);
    g.hostname = o_.hostname;
    g.stall_timeout = o_.stall_timeout;
    auto abort = std::make_shared<comm::GlooAbort>();
    member_.watch(epoch.number, [abort] { abort->abort(); });
    std::optional<comm::Gloo> connected;
    try {
      connected.emplace(g, member_.shared_store(), abort);
      last_ = *connected;
      failed_setups_ = 0;
      began_.connected += lap_();
    } catch (const CommunicationError& e) {  // most often a member lost while it connected
      began_.connected += lap_();
      result_.losses.emplace_back(e.what());
      if (member_.replaced(epoch.number)) return std::nullopt;  // (its peers had moved on: not this worker's failure)
      if (++failed_setups_ >= kMaxFailedSetups) throw;
      member_.ask_switch(epoch.number);
    }
    return connected;
  }
  // The model and trainer of the epoch, continued from the round it starts from, trained until
  // the run ends or a switch is agreed.
  Ended train_epoch(const Epoch& epoch, const Snapshots::Plan& plan, comm::Gloo comm) {
    result_.model.reset();
    Model& model = result_.model.emplace(make_(epoch.rank, epoch.size()));
    began_.made += lap_();
    Trainer opt = construct_(comm);
    const Resumed from = continue_run(opt, model, epoch, plan, comm);
    if (reached_ > from.step) result_.steps_redone += reached_ - from.step;
    reached_ = from.step;
    // Every member, a newcomer too, holds the state it continues from: a loss before the
    // first round end of this epoch continues from there again, not from step 0.
    if (from) opt.save(model, snapshots_);
    began_.continued += lap_();
    return rounds(opt, model, epoch);
  }
  // The settings agreed by name among the members, then the run resumed from the round the
  // epoch starts from (or the checkpoints a resumed run starts from, or step 0). A worker whose
  // own settings or state do not fit leaves.
  Resumed continue_run(Trainer& opt, Model& model, const Epoch& epoch, const Snapshots::Plan& plan, comm::Gloo& comm) {
    try {
      detail::agree_settings(comm, detail::agreed_settings(o_, opt.options(), stop_),
                             epoch.round ? std::optional<int>(plan.donor) : std::nullopt, epoch.number);
      if (!epoch.round && o_.resume) {
        snapshots_.clear();
        return opt.resume(model, *o_.checkpoints, stop_, {.workers_may_change = true});
      }
      return opt.resume(model, snapshots_, stop_);
    } catch (const std::invalid_argument&) {  // this worker's settings were refused
      leave_quietly(member_);
      throw;
    } catch (const CheckpointError&) {  // the state does not fit this worker's settings
      leave_quietly(member_);
      throw;
    }
  }
  // The epoch's rounds: a snapshot, a checkpoint, a scripted leave or switch at their round
  // ends, and an admission asked for when workers wait; at the end, the final consensus.
  Ended rounds(Trainer& opt, Model& model, const Epoch& epoch) {
    bool asked = false;
    while (opt.steps_taken() < opt.info().total_steps) {
      member_.check();
      opt.step(model, opt.next_batch());
      reached_ = opt.steps_taken();
      if (!opt.round_ended()) continue;
      const std::size_t round = opt.last_round().round + 1;  // rounds completed, as the log counts them
      if (!timed_) {
        began_.first_round += lap_();
        result_.starts.push_back(began_);
        timed_ = true;
      }
      on_round_(opt.last_round(), epoch, model);
      const bool leaving = o_.leave_after_round == std::optional<std::size_t>(round);
      const bool scripted = o_.script.count(round) > 0 || leaving;
      const bool agreed = opt.checkpoint_agreed();  // (save() takes it)
      if (agreed || scripted || round % o_.snapshot_every == 0) opt.save(model, snapshots_);
      if (o_.checkpoints && round % o_.checkpoint_every == 0) opt.save(model, *o_.checkpoints);
      if (leaving) {
        member_.leave();
        result_.model.reset();
        result_.log = member_.log();
        return Ended::run;  // this worker's connections close: the coordinator forms the next epoch
      }
      if (agreed || scripted) {
        member_.ask_switch(epoch.number);
        return Ended::epoch;
      }
      if (epoch.rank == 0 && !asked && o_.script.empty() && member_.waiting() > 0) {
        opt.request_checkpoint();  // agreed at a later round end on every member
        asked = true;
      }
    }
    result_.report = opt.finish(model);
    member_.finish();
    result_.log = member_.log();
    return Ended::run;
  }

  Member& member_;
  const TrainOptions& o_;
  const Stop& stop_;
  MakeModel& make_;
  Construct& construct_;
  OnRound& on_round_;
  Snapshots snapshots_;
  TrainResult<Model> result_;
  std::int64_t after_ = 0;
  std::size_t reached_ = 0;       // the steps this worker had taken when its last epoch ended
  bool trained_ = false;          // it began an epoch (a run that finishes without it then is its failure)
  int failed_setups_ = 0;         // epochs in a row whose connections could not be set up
  detail::Lap lap_;
  detail::Retired retired_;         // the communicators of past epochs, closing
  std::optional<comm::Gloo> last_;  // the last epoch's (its only handle once its trainer is gone)
  EpochStart began_;   // how the epoch being begun began (summed over those that failed before a round end)
  bool timed_ = true;  // the last epoch reached a round end: the next one is timed from its end
};
}  // namespace train_detail

}  // namespace cocod::elastic
