#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/elastic/detail/train_options.hpp is internal: include <cocod/elastic/train.hpp>"
#endif
// The settings of an elastic worker's training (elastic::train).
#include <chrono>
#include <cstddef>
#include <optional>
#include <set>
#include <string>

#include "cocod/checkpoint.hpp"

namespace cocod::elastic {

/// Settings of elastic::train.
struct TrainOptions {
  /// The address the peers reach this worker at (comm::GlooOptions::hostname).
  std::string hostname{};
  /// A collective that waits this long for a peer throws (comm::GlooOptions::stall_timeout).
  std::chrono::milliseconds stall_timeout = std::chrono::seconds(300);
  /// How long to wait for the coordinator to form an epoch this worker belongs to.
  std::chrono::milliseconds epoch_timeout = std::chrono::seconds(600);
  /// Keep the state every this many round ends (1: a lost worker costs at most two rounds,
  /// 2k - 1 steps; each snapshot copies the parameters and the update's state, and checksums them).
  std::size_t snapshot_every = 1;
  /// Scripted membership changes (a replay of a log): at the end of each of these rounds (counted
  /// as rounds completed, as the log's "starts: round R") every member ends its epoch, so that
  /// the coordinator forms the next one there, with the workers that wait then. With a script,
  /// waiting workers are admitted only there (not at the next agreed round end).
  std::set<std::size_t> script{};
  /// This worker leaves the run once this many rounds completed (a scripted leave).
  std::optional<std::size_t> leave_after_round{};
  /// Checkpoint files as well, the fallback when the coordinator itself is lost: every
  /// `checkpoint_every` rounds (counted as rounds completed) the epoch's members write a
  /// checkpoint into `checkpoints` (Trainer::save: each its own file, rank 0 the manifest), a
  /// directory every worker sees (a shared file system across machines). Every worker passes
  /// the same checkpoints (set on all or on none), checkpoint_every, resume and snapshot_every
  /// (they decide which collectives it calls and which rounds it holds): a worker that differs
  /// from the epoch's donor (or, in an epoch that continues from no round, from what most
  /// members pass) ends with std::invalid_argument naming the field.
  std::optional<Checkpoints> checkpoints{};
  std::size_t checkpoint_every = 10;
  /// An epoch that continues from no round held in memory (the first, or one whose members all
  /// came after every state was lost) resumes from the newest checkpoint in `checkpoints`
  /// instead of starting at step 0; from its consensus model when another number of workers
  /// wrote it (as ResumeOptions::workers_may_change does).
  bool resume = false;
};

}  // namespace cocod::elastic
