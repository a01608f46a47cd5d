#pragma once
// What a run reports: per round the measured compute, communication and waiting times behind
// the round-time model (docs/algorithm.md), and the totals.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace cocod {

/// Facts about a run that callbacks get at its start.
struct RunInfo {
  std::string algorithm;          ///< "CoCoD-SGD", "S-SGD", "Local-SGD", "Pipe-SGD"
  int rank = 0;                   ///< this worker
  int workers = 1;                ///< N
  std::size_t parameters = 0;     ///< number of model parameters
  std::size_t period = 1;         ///< k
  std::size_t batch_size = 1;     ///< this worker's M_i
  std::size_t total_batch = 1;    ///< sum_i M_i
  double weight = 1.0;            ///< w_i = M_i / sum_j M_j
  double steps_per_epoch = 0.0;   ///< sum_i n_i / sum_i M_i
  std::size_t total_steps = 0;    ///< steps the run will take (0 when unbounded)
  /// The fewest local steps whose compute hides one exchange (schedule::Plan::hiding_steps; 0
  /// until measured): in Trainer::info() and Operations::info() the plan in force, in
  /// Report::info and on_begin() the first plan's.
  std::size_t hiding_steps = 0;
};

/// One round (k local steps) on one worker. Times are seconds of wall clock.
struct RoundStats {
  std::size_t round = 0;          ///< 0-based round index
  std::size_t first_step = 0;     ///< global index of the round's first step
  std::size_t steps = 0;          ///< steps in this round (k, or fewer in a last partial round)
  std::size_t period = 1;         ///< the round's k (an adaptive schedule may change it)
  std::size_t batch_size = 1;     ///< this worker's M_i in the round
  double epoch = 0.0;             ///< epochs completed at the round's end
  double learning_rate = 0.0;     ///< learning rate of the round's last step
  double loss = 0.0;              ///< this worker's mean mini-batch loss over the round
  /// The latest weighted mean over all workers of their round losses that has reached this
  /// worker, and the round it belongs to (NaN and SIZE_MAX until one has arrived). Every
  /// worker sees the same value at the same round.
  double consensus_loss = std::numeric_limits<double>::quiet_NaN();
  std::size_t consensus_loss_round = static_cast<std::size_t>(-1);
  double compute_s = 0.0;  ///< gradients and local updates
  double comm_s = 0.0;     ///< from posting the round's collectives to their completion
  double wait_s = 0.0;     ///< time blocked waiting for collectives
  double round_s = 0.0;    ///< wall time of the whole round
  /// Reductions of the round skipped because a worker withheld a non-finite contribution
  /// (NonFinite::skip).
  std::size_t skipped = 0;
  /// Bytes this worker sent in the round's collectives, as the schedule they run sends them
  /// (a ring all-reduce: 2 (N - 1) / N of the buffer; a compressed exchange: its encoded blocks).
  /// A rank of a group (comm::Grouped) counts its share: 1/G of its group's, over the slow link.
  double bytes_sent = 0.0;
};

/// Where a run continued from (Trainer::resume() returns it, and Report::resumed holds it).
struct Resumed {
  bool from_checkpoint = false;  ///< false: the store held no checkpoint, so the run began at step 0
  std::size_t round = 0;         ///< the checkpoint's round: the run went on from its start
  std::size_t step = 0;          ///< steps taken before it (equal to the run's length: it had ended there)
  int workers = 0;               ///< the workers that wrote it (another number with workers_may_change)
  std::string folder{};          ///< its folder
  explicit operator bool() const noexcept { return from_checkpoint; }
};

/// The result of a run on one worker.
struct Report {
  RunInfo info;
  std::vector<RoundStats> rounds;
  std::size_t steps = 0;
  double epochs = 0.0;
  double seconds = 0.0;      ///< wall time from begin to the end of finish (consensus included)
  bool stopped_early = false;  ///< a stop request (a callback's, or request_stop()) ended the run
  /// The oldest rounds that are no longer in `rounds` (Options::report_rounds bounds it), so
  /// that rounds_dropped + rounds.size() rounds ended.
  std::size_t rounds_dropped = 0;
  /// Whether and from where the run resumed from a checkpoint (resume(), resume_from()).
  Resumed resumed;

  /// Median of a per-round field over full rounds (the last partial round and round 0, whose
  /// timing includes start-up, are skipped when there are enough rounds). With an adaptive
  /// schedule, call it on a copy that keeps the rounds of one period.
  template <class Field>
  [[nodiscard]] double median(Field field) const {
    std::vector<double> v;
    const std::size_t skip = rounds.size() > 4 ? 1 : 0;
    for (std::size_t i = skip; i < rounds.size(); ++i)
      if (rounds[i].steps == rounds[i].period || rounds.size() == 1) v.push_back(rounds[i].*field);
    if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
    auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
  }
  [[nodiscard]] double median_round_s() const { return median(&RoundStats::round_s); }
  [[nodiscard]] double median_compute_s() const { return median(&RoundStats::compute_s); }
  [[nodiscard]] double median_comm_s() const { return median(&RoundStats::comm_s); }
  [[nodiscard]] double median_wait_s() const { return median(&RoundStats::wait_s); }
  /// Sum of a per-round field over the run (for example the total time waited, total(&RoundStats::wait_s)).
  template <class Field>
  [[nodiscard]] double total(Field field) const {
    double sum = 0.0;
    for (const auto& r : rounds) sum += r.*field;
    return sum;
  }
  /// The latest consensus loss that reached this worker: the last round's, which finish()'s
  /// reductions bring (an algorithm whose average arrives a round late too); NaN when none arrived
  /// (a report of no round), and NaN (or infinite) when the run diverged: a non-finite loss is
  /// reported, never skipped.
  [[nodiscard]] double final_loss() const {
    for (auto it = rounds.rbegin(); it != rounds.rend(); ++it)
      if (it->consensus_loss_round != static_cast<std::size_t>(-1)) return it->consensus_loss;
    return std::numeric_limits<double>::quiet_NaN();
  }
};

}  // namespace cocod
