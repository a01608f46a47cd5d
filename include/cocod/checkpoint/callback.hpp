#pragma once
// A callback that checkpoints a run as it goes: every R rounds, or every T seconds (rank 0's
// clock decides, and the request reaches every worker with a reduced buffer, so that all save
// at the same round end without an extra collective).
#include <chrono>
#include <cstddef>

#include "cocod/checkpoint/store.hpp"
#include "cocod/errors.hpp"
#include "cocod/report.hpp"

namespace cocod::callbacks {

/// When callbacks::Checkpoint saves; 0 turns a trigger off, and at least one must be on.
struct CheckpointEvery {
  std::size_t rounds = 0;  ///< after every `rounds` rounds
  double seconds = 0.0;    ///< at the first round end once `seconds` have passed since the last one
};

/// Saves `trainer`'s run of `model` into `store` (see Trainer::save) at full round ends:
///
///     cocod::Checkpoints store{"checkpoints"};
///     cocod::callbacks::Checkpoint save{opt, model, store, {.rounds = 50}};
///     opt.resume_from(store);                    // continue the last run, if there was one
///     opt.optimize(model, cocod::Epochs{90}, save);
///
/// Every worker passes the same settings. saves() counts the checkpoints written.
template <class Algorithm, class Model>
class Checkpoint {
 public:
  Checkpoint(Algorithm& trainer, Model& model, Checkpoints store, CheckpointEvery every)
      : trainer_(trainer), model_(model), store_(std::move(store)), every_(every) {
    if (every_.rounds == 0 && !(every_.seconds > 0.0))
      invalid_setting("cocod::callbacks::CheckpointEvery", "rounds", "or seconds must be > 0", "rounds = 0, seconds = 0");
    if (every_.seconds < 0.0 || every_.seconds != every_.seconds)
      invalid_setting("cocod::callbacks::CheckpointEvery", "seconds", "must be >= 0", every_.seconds);
  }

  void on_begin(const RunInfo&) { last_ = Clock::now(); }
  /// (after every callback's on_round, so that their stop votes are in the checkpoint)
  void after_round(const RoundStats& r) {
    if (r.steps != r.period) return;  // a last, partial round: the run is over
    if (every_.seconds > 0.0 && trainer_.communicator().rank() == 0 &&
        std::chrono::duration<double>(Clock::now() - last_).count() >= every_.seconds) {
      trainer_.request_checkpoint();
      last_ = Clock::now();
    }
    const bool due = (every_.rounds > 0 && (r.round + 1) % every_.rounds == 0) || trainer_.checkpoint_agreed();
    if (!due) return;
    trainer_.save(model_, store_);
    last_ = Clock::now();
    ++saves_;
  }
  [[nodiscard]] std::size_t saves() const noexcept { return saves_; }

 private:
  using Clock = std::chrono::steady_clock;
  Algorithm& trainer_;
  Model& model_;
  Checkpoints store_;
  CheckpointEvery every_;
  Clock::time_point last_{};
  std::size_t saves_ = 0;
};

}  // namespace cocod::callbacks
