#pragma once
// What an elastic worker's train() returns: its final model and report, and what the changes of
// membership cost it (the steps it took again, why its epochs ended, where the time of each new
// epoch's start went).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cocod/report.hpp"

namespace cocod::elastic {

/// Where the time went between the end of a worker's epoch (or its start) and the first round
/// end of its next epoch, in seconds of each phase, one after the other (an epoch that ended
/// before its first round end, a set-up a loss cut short, adds its phases to the next one's).
struct EpochStart {
  std::int64_t epoch = 0;
  double since_unix = 0.0;  ///< when the wait began (the epoch before ended: a loss, a switch), Unix time
  double formed = 0.0;      ///< until the coordinator formed the epoch (of the survivors, the newcomers)
  double agreed = 0.0;      ///< until it chose the round the epoch continues from (every member reported)
  double connected = 0.0;   ///< the members' comm::Gloo set-up
  double made = 0.0;        ///< the model built for the epoch's rank and size: make(rank, workers)
  double continued = 0.0;   ///< the trainer built, the settings agreed, the state of that round restored
  double first_round = 0.0; ///< training to the epoch's first round end
  [[nodiscard]] double total() const noexcept { return formed + agreed + connected + made + continued + first_round; }
};

/// What an elastic worker did: the final model and its report (both nullopt when it left by
/// script or the run ended before it was admitted), how many epochs it took part in, and the
/// coordinator's log when it ended.
template <class Model>
struct TrainResult {
  std::optional<Model> model;
  std::optional<Report> report;
  std::int64_t epochs = 0;
  std::string log;
  /// The work the membership changes cost this worker: the steps it took again because an
  /// epoch ended by a loss after the round the next one continued from: the steps it completed
  /// after that round (the step during which the loss showed is lost too, and not counted).
  std::size_t steps_redone = 0;
  /// Why each of this worker's epochs that ended by a loss ended (what its collective raised:
  /// a lost peer, a worker whose settings were refused, a stall on a member the coordinator
  /// expelled).
  std::vector<std::string> losses;
  /// How each epoch of this worker that reached a round end began (EpochStart's phases).
  std::vector<EpochStart> starts;
};

}  // namespace cocod::elastic
