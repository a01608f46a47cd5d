#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/loop.hpp is internal: include <cocod.hpp>"
#endif
// Where a run is and what it draws: the position (step, round, the round's losses), the plan in
// force (period and batch size), the facts every worker agreed on, and the sampler with its
// batch. All of it run state, saved in a checkpoint.
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "cocod/data/sampler.hpp"
#include "cocod/report.hpp"
#include "cocod/schedule/fixed.hpp"
#include "cocod/stop.hpp"

namespace cocod::detail {

/// Where a run is.
struct Position {
  std::size_t step = 0;           ///< steps taken
  std::size_t round = 0;          ///< the current round
  std::size_t step_in_round = 0;  ///< steps taken in the current round
  std::size_t total_steps = 0;    ///< the run's length, 0 when unknown
  double loss_sum = 0.0;          ///< this worker's losses in the current round
  double learning_rate = 0.0;     ///< of the latest step
  bool round_ended = false;       ///< the latest step ended a round
  bool finishing = false;         ///< in finish(): every reduction says so, so that workers that end at different steps all fail
};

class Loop {
 public:
  /// A new run: the agreed facts, the first plan, a sampler of this worker's shard of `samples`;
  /// `reserve`: the most samples a re-plan may give one batch.
  void start(const RunInfo& info, const schedule::Plan& plan, std::size_t samples, std::uint64_t seed, std::size_t reserve) {
    info_ = info;
    plan_ = plan;
    samples_ = samples;
    sampler_ = BatchSampler(samples, seed, info.rank);
    batch_.reserve(reserve);
    batch_.assign(plan.batch_size, 0);
    pos_ = Position{};
    progress_ = Progress{0.0, 0, info.steps_per_epoch};
  }
  [[nodiscard]] Position& pos() noexcept { return pos_; }
  [[nodiscard]] const Position& pos() const noexcept { return pos_; }
  [[nodiscard]] const RunInfo& info() const noexcept { return info_; }
  [[nodiscard]] const schedule::Plan& plan() const noexcept { return plan_; }

  void set_length(std::size_t total_steps) noexcept { pos_.total_steps = info_.total_steps = total_steps; }
  /// The passes over the data done (counted from the run's last change of workers on).
  [[nodiscard]] double epochs() const noexcept { return progress_.passes(pos_.step); }
  [[nodiscard]] const Progress& progress() const noexcept { return progress_; }
  /// A run that continues at step s from `p` (another run's progress, a checkpoint's).
  void continue_from(const Progress& p, std::size_t s) noexcept { progress_ = p.continued(s, info_.steps_per_epoch); }
  /// The plan in force from now on (at a round boundary, the same on every worker).
  void apply(const schedule::Plan& p) {
    plan_ = p;
    info_.period = p.period;
    info_.hiding_steps = p.hiding_steps;
    info_.batch_size = p.batch_size;
    info_.weight = static_cast<double>(p.batch_size) / static_cast<double>(info_.total_batch);
    batch_.resize(p.batch_size);  // within the capacity reserved at the start
  }

  /// This worker's next batch (valid until the next call).
  std::span<const std::size_t> draw() {
    sampler_.next(batch_);
    return batch_;
  }
  void check_batch(std::span<const std::size_t> batch) const {
    for (const std::size_t i : batch)
      if (i >= samples_)
        throw std::out_of_range("cocod: step(): batch index " + std::to_string(i) + " is outside this worker's shard (rank " +
                                std::to_string(info_.rank) + " has " + std::to_string(samples_) + " samples)");
  }
  /// A step's loss; true when it is the round's last step (its mean loss is ready).
  bool count(double loss) noexcept {
    pos_.loss_sum += loss;
    return pos_.step_in_round + 1 == plan_.period;
  }
  /// The step is taken; true when it ends the round.
  bool advance() noexcept {
    ++pos_.step;
    ++pos_.step_in_round;
    pos_.round_ended = false;
    return pos_.step_in_round == plan_.period;
  }
  /// The round is closed: the next step begins the next one.
  void next_round() noexcept {
    ++pos_.round;
    pos_.step_in_round = 0;
    pos_.round_ended = true;
  }

  /// The position with its plan (section "position"), and the sampler (section "sampler").
  template <class Archive>
  void serialize_position(Archive& a) {
    a("step", pos_.step);
    a("round", pos_.round);
    a("step_in_round", pos_.step_in_round);
    a("loss_sum", pos_.loss_sum);
    a("learning_rate", pos_.learning_rate);
    a("round_ended", pos_.round_ended);
    schedule::Plan p = plan_;
    a("period", p.period);
    a("batch_size", p.batch_size);
    a("hiding_steps", p.hiding_steps);
    if constexpr (!Archive::saving) {
      if (pos_.step_in_round != 0) a.fail("step_in_round", "is not 0: the checkpoint was not taken between rounds");
      if (p.period == 0 || p.batch_size == 0 || p.batch_size > info_.total_batch)
        a.fail("period", "and batch_size are not a plan this run can have (corrupt)");
      apply(p);
    }
  }
  /// A run's passes done and where they are counted from (section "progress" of a saved state).
  template <class Archive>
  static void serialize_progress(Archive& a, Progress& p) {
    a("done", p.done);
    a("step", p.step);
    a("steps_per_epoch", p.steps_per_epoch);
    if constexpr (!Archive::saving)
      if (!(p.done >= 0.0) || !(p.steps_per_epoch > 0.0)) a.fail("done", "and steps_per_epoch are not a run's progress (corrupt)");
  }
  template <class Archive>
  void serialize_sampler(Archive& a) {
    sampler_.serialize(a);
  }

 private:
  Position pos_{};
  Progress progress_{};
  schedule::Plan plan_{};
  RunInfo info_{};
  std::size_t samples_ = 0;
  BatchSampler sampler_{};
  std::vector<std::size_t> batch_;  // scratch of draw()
};

}  // namespace cocod::detail
