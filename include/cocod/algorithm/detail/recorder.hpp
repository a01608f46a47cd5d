#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/recorder.hpp is internal: include <cocod.hpp>"
#endif
// The clock and the report of a run: per round the compute, communication and waiting time
// behind the round-time model, the report so far, and the timeline lane when one is set.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>

#include "cocod/comm/communicator.hpp"
#include "cocod/report.hpp"
#include "cocod/trace/timeline.hpp"

namespace cocod::detail {

class Recorder {
 public:
  using time_point = comm::Clock::time_point;

  static double seconds(comm::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

  /// Records into `lane` from now on (nullptr: stop recording).
  void trace(trace::Lane* lane) noexcept { lane_ = lane; }

  /// A new run that began at `run_start`; the report keeps the latest `keep` rounds (0: all).
  void start(const RunInfo& info, time_point run_start, std::size_t keep) {
    keep_ = keep;
    run_start_ = run_start;
    report_ = Report{};
    report_.info = info;
    current_ = RoundStats{};
    collectives_ = 0;
  }
  /// The run's length is known: reserve so that recording allocates nothing while it runs.
  void reserve(const RunInfo& info, std::size_t rounds) {
    report_.info = info;
    report_.rounds.reserve(keep_ > 0 ? std::min(rounds + 1, 2 * keep_) : rounds + 1);
    if (lane_) lane_->reserve(lane_->events().size() + 3 * info.total_steps + 8);  // steps, waits, collectives
  }

  void begin_round(std::size_t round, std::size_t first_step, std::size_t period, std::size_t batch_size,
                   time_point t0) {
    current_ = RoundStats{};
    current_.round = round;
    current_.first_step = first_step;
    current_.period = period;
    current_.batch_size = batch_size;
    round_start_ = t0;
  }
  /// A step from t0 to t1; the time it waited is not compute.
  void step(std::size_t index, time_point t0, time_point t1, double waited_before) {
    current_.compute_s += seconds(t1 - t0) - (current_.wait_s - waited_before);
    if (lane_) lane_->record(trace::Kind::step, index, t0, t1);
  }
  /// A blocking collective from t0 to t1 that sent `bytes`: communication, all of it waited.
  void blocking(std::size_t index, time_point t0, time_point t1, double bytes) {
    const double s = seconds(t1 - t0);
    current_.bytes_sent += bytes;
    current_.comm_s += s;
    current_.wait_s += s;
    ++collectives_;
    if (lane_) {
      lane_->record(trace::Kind::all_reduce, index, t0, t1);
      lane_->record(trace::Kind::wait, index, t0, t1);
    }
  }
  /// A collective posted at `posted`, completed at `done`, waited for from t0 to t1, that sent `bytes`.
  void awaited(std::size_t index, time_point posted, time_point done, time_point t0, time_point t1, double bytes) {
    current_.bytes_sent += bytes;
    current_.wait_s += seconds(t1 - t0);
    current_.comm_s += seconds(done - posted);
    ++collectives_;
    if (lane_) {
      lane_->record(trace::Kind::all_reduce, index, posted, done);
      lane_->record(trace::Kind::wait, index, t0, t1);
    }
  }

  [[nodiscard]] double waited() const noexcept { return current_.wait_s; }
  /// A reduction skipped (a withheld non-finite contribution).
  void skipped() noexcept { ++current_.skipped; }
  [[nodiscard]] const RoundStats& current() const noexcept { return current_; }
  /// Collectives completed since the last call.
  std::size_t take_collectives() noexcept { return std::exchange(collectives_, 0); }

  /// Completes the round's statistics (`close` fills the rest) and appends them to the report.
  template <class Close>
  const RoundStats& close_round(Close&& close) {
    close(current_);
    current_.round_s = seconds(comm::Clock::now() - round_start_);
    if (keep_ > 0 && report_.rounds.size() >= 2 * keep_) trim();  // the oldest half: amortized, no allocation
    report_.rounds.push_back(std::exchange(current_, RoundStats{}));  // (what follows until the next round: see finish())
    return report_.rounds.back();
  }
  /// Rounds closed so far, those dropped from the report included.
  [[nodiscard]] std::size_t closed() const noexcept { return report_.rounds_dropped + report_.rounds.size(); }

  /// Run state: the report so far (the clock restarts with the run).
  [[nodiscard]] const Report& report() const noexcept { return report_; }
  /// The report so far, for a checkpoint (between rounds). Restoring keeps the room reserve()
  /// made, so the rest of the run still allocates nothing.
  template <class Archive>
  void serialize(Archive& a) {
    static_assert(sizeof(RoundStats) == 16 * 8, "RoundStats changed: update the checkpoint format");
    if constexpr (Archive::saving) {
      a("rounds", report_.rounds);
    } else {
      std::vector<RoundStats> rounds;
      a("rounds", rounds);
      report_.rounds.assign(rounds.begin(), rounds.end());
    }
    a("stopped_early", report_.stopped_early);
    a("rounds_dropped", report_.rounds_dropped);
  }
  void stopped_early() noexcept { report_.stopped_early = true; }
  /// The consensus loss that finish()'s reductions brought (the last round's, which no round end
  /// after it carries): the last round's record shows it, so that final_loss() is the run's.
  void final_consensus(std::size_t round, double loss) noexcept {
    if (report_.rounds.empty() || round == static_cast<std::size_t>(-1)) return;
    RoundStats& last = report_.rounds.back();
    if (last.consensus_loss_round != static_cast<std::size_t>(-1) && last.consensus_loss_round >= round) return;
    last.consensus_loss = loss;
    last.consensus_loss_round = round;
  }
  /// The run continued from a checkpoint.
  void resumed(Resumed r) { report_.resumed = std::move(r); }
  /// The report of the finished run, with its totals. A reduction skipped after the last round
  /// closed (by the final wait) counts in that round.
  Report finish(std::size_t steps, double epochs) {
    if (!report_.rounds.empty()) report_.rounds.back().skipped += std::exchange(current_.skipped, 0);
    report_.steps = steps;
    report_.epochs = epochs;
    report_.seconds = seconds(comm::Clock::now() - run_start_);
    if (keep_ > 0 && report_.rounds.size() > keep_) trim();
    return std::move(report_);
  }

 private:
  // Keeps the latest `keep_` rounds of the report; the others count as dropped.
  void trim() {
    const std::size_t drop = report_.rounds.size() - keep_;
    report_.rounds.erase(report_.rounds.begin(), report_.rounds.begin() + static_cast<std::ptrdiff_t>(drop));
    report_.rounds_dropped += drop;
  }

  Report report_{};
  RoundStats current_{};
  time_point run_start_{}, round_start_{};
  std::size_t collectives_ = 0;
  std::size_t keep_ = 0;
  trace::Lane* lane_ = nullptr;
};

}  // namespace cocod::detail
