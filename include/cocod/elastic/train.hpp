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
//         [&](cocod::comm::Gloo comm) { return cocod::CoCoDSGD<Model, cocod::comm::Gloo>(comm, options); });
//     // result.model: the final consensus; result.report: this worker's report
//
// For a fixed membership nothing changes: the iterates are those of the same trainer on
// comm::Gloo (or comm::Threads). With changes, a run is reproducible given its membership log:
// TrainOptions::script replays its changes (each "epoch e starts: round R" of the log) at the
// same rounds, with the same bits.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/checkpoint.hpp"
#include "cocod/comm/gloo.hpp"
#include "cocod/elastic/membership.hpp"
#include "cocod/elastic/result.hpp"
#include "cocod/elastic/snapshots.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/elastic/detail/train_options.hpp"
#include "cocod/elastic/detail/worker.hpp"
#undef COCOD_INTERNAL_INCLUDE
#include "cocod/errors.hpp"
#include "cocod/options.hpp"
#include "cocod/report.hpp"
#include "cocod/stop.hpp"

namespace cocod::elastic {

/// Trains as a worker of the elastic run `member` joined, until `stop`. Each epoch, the model is
/// make(rank, workers) (its data shard among the epoch's workers; its parameters then come from the
/// state the epoch continues from) and the trainer is construct(comm::Gloo), which returns it
/// (`return Trainer(comm, options, ...)`). on_round(stats, epoch, model) is called at every round
/// end (a progress line, a curve's point). Returns when the run ended (every member holds the
/// same final consensus), when this worker left by script, or when the run ended before it was
/// admitted. Throws Expelled if the coordinator expelled this worker, CommunicationError when the
/// coordinator is gone (TrainOptions::checkpoints then holds the newest checkpoint to resume
/// from), std::invalid_argument naming a TrainOptions field that cannot be used (snapshot_every 0,
/// resume without checkpoints) or a setting that differs from the run's (checkpoints,
/// checkpoint_every, resume, snapshot_every, Options::period, non_finite and max_skips, the stop:
/// the others go on without this worker), CheckpointError for a checkpoint that does not fit,
/// CommunicationError after three epochs in a row whose connections could not be set up, and any
/// failure that is not a lost peer (a peer's own error ends every worker, as in comm::Gloo).
template <class Trainer, class Stop, class MakeModel, class Construct, class OnRound = train_detail::NoHook>
auto train(Member& member, const TrainOptions& o, const Stop& stop, MakeModel&& make, Construct&& construct,
           OnRound&& on_round = {}) {
  static_assert(std::is_same_v<std::invoke_result_t<Construct&, comm::Gloo>, Trainer>,
                "cocod::elastic::train: construct(comm) must return the trainer: [&](cocod::comm::Gloo comm) { return "
                "Trainer(comm, options, ...); }");
  if (o.snapshot_every == 0) invalid_setting("cocod::elastic::TrainOptions", "snapshot_every", "must be >= 1", 0);
  if (o.checkpoints && o.checkpoint_every == 0)
    invalid_setting("cocod::elastic::TrainOptions", "checkpoint_every", "must be >= 1 with checkpoints", 0);
  if (o.resume && !o.checkpoints)
    invalid_setting("cocod::elastic::TrainOptions", "resume", "needs checkpoints (the directory to resume from)", "true");
  train_detail::Worker<Trainer, Stop, std::remove_reference_t<MakeModel>, std::remove_reference_t<Construct>,
                       std::remove_reference_t<OnRound>>
      worker(member, o, stop, make, construct, on_round);
  return worker.run();
}

}  // namespace cocod::elastic
