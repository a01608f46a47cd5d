#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/control.hpp is internal: include <cocod.hpp>"
#endif
// The control slots: a few scalars after the model part of every reduced buffer that, summed
// with it, give every worker the same consensus loss and the same stop decision with no extra
// collective. Each part owns a region of them: the votes and the step check (here), the
// non-finite guard (guard.hpp) and a measuring schedule's window (schedule/measurement.hpp).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace cocod::detail {

inline constexpr std::size_t npos = static_cast<std::size_t>(-1);

/// What the control slots of one reduced buffer carry (every worker writes the same tag).
struct ControlTag {
  std::size_t loss_round = npos;  ///< round whose loss they carry, or npos
  bool measured = false;          ///< the schedule's window follows them
  bool withheld = false;          ///< this worker withheld its contribution (a non-finite value)
  bool guarded = true;            ///< the guard's slots are written and read (not in a control-only reduction)
};

/// The layout, [votes: 4][steps: N][guard: G][window: W], and the host staging the parts write
/// into before a reduction and read from after it.
template <class T>
class ControlSlots {
 public:
  static constexpr std::size_t votes = 4;

  void start(std::size_t workers, std::size_t guard, std::size_t window) {
    workers_ = workers;
    guard_ = guard;
    staging_.assign(votes + workers + guard + window, T(0));
  }
  /// Slots per reduced buffer.
  [[nodiscard]] std::size_t size() const noexcept { return staging_.size(); }
  [[nodiscard]] std::span<T> staging() noexcept { return staging_; }
  [[nodiscard]] std::span<T> vote_slots() noexcept { return std::span<T>(staging_).first(votes); }
  [[nodiscard]] std::span<T> step_slots() noexcept { return std::span<T>(staging_).subspan(votes, workers_); }
  [[nodiscard]] std::span<T> guard_slots() noexcept { return std::span<T>(staging_).subspan(votes + workers_, guard_); }
  [[nodiscard]] std::span<T> window_slots() noexcept { return std::span<T>(staging_).subspan(votes + workers_ + guard_); }

 private:
  std::vector<T> staging_;
  std::size_t workers_ = 0, guard_ = 0;
};

/// The votes: [w_i * (latest complete round's mean loss), w_i of a worker whose mean loss is not
/// finite (it sends none), stop vote, checkpoint vote], and the step check: N slots in which
/// each worker writes the step it is at, and whether it is finishing its run, so that workers
/// out of step, or one that ends its run while the others go on, are an error on every worker.
/// Owns the run state of losses and votes.
class Votes {
 public:
  /// Run state: the loss waiting to be sent, the consensus that arrived, the votes.
  struct Tally {
    std::size_t ready_round = npos;  ///< the round whose mean loss waits to be sent
    double ready_loss = 0.0;
    std::size_t consensus_round = npos;  ///< the round of the latest consensus loss
    double consensus_loss = std::numeric_limits<double>::quiet_NaN();
    bool vote = false;               ///< this worker asked to stop
    bool stop_agreed = false;        ///< some worker's request has arrived
    bool checkpoint_vote = false;    ///< this worker asks for a checkpoint (sent once)
    bool checkpoint_agreed = false;  ///< some worker's request for a checkpoint has arrived
  };

  void start(std::size_t workers) {
    workers_ = workers;
    s_ = Tally{};
    out_of_step_ = false;
  }
  [[nodiscard]] const Tally& state() const noexcept { return s_; }

  /// The mean loss of `round` is ready to travel with the next reduced buffer.
  void loss_ready(std::size_t round, double mean_loss) noexcept {
    s_.ready_round = round;
    s_.ready_loss = mean_loss;
  }
  void vote() noexcept { s_.vote = true; }
  void vote_checkpoint() noexcept { s_.checkpoint_vote = true; }
  /// The checkpoint that was asked for is taken.
  void checkpoint_taken() noexcept { s_.checkpoint_agreed = false; }

  /// Fills the vote and step slots; `send_loss` false: this worker sends no loss (it withholds its
  /// contribution: the loss may be the NaN). `finite`: a mean loss that is not finite is not
  /// sent either, and its weight is counted out of the consensus loss (the guard is on).
  /// `finishing`: the reduction is one of finish(). Returns the loss round the slots carry.
  template <class T>
  std::size_t write(std::span<T> votes, std::span<T> steps, double weight, bool send_loss, bool finite, std::size_t rank,
                    std::size_t step, bool finishing) noexcept {
    const bool ready = s_.ready_round != npos && send_loss;
    const bool unsent = ready && finite && !std::isfinite(s_.ready_loss);
    votes[0] = ready && !unsent ? static_cast<T>(weight * s_.ready_loss) : T(0);
    votes[1] = unsent ? static_cast<T>(weight) : T(0);
    votes[2] = s_.vote ? T(1) : T(0);
    votes[3] = std::exchange(s_.checkpoint_vote, false) ? T(1) : T(0);
    std::fill(steps.begin(), steps.end(), T(0));
    steps[rank] = static_cast<T>((step & step_mask) + 1 + (finishing ? finish_mark : 0));  // exact in a float
    return s_.ready_round;
  }
  /// Reads the slots after a reduction. `kept_weight`: the summed weights of the workers whose
  /// contribution is in the sum (1 when none withheld); less the weights of the losses not sent,
  /// it divides the consensus loss (by 1, exactly, when every loss arrived), NaN when none did.
  template <class T>
  void read(std::span<const T> votes, std::span<const T> steps, std::size_t loss_round, double kept_weight) noexcept {
    if (loss_round != npos) {
      const double divisor = votes[1] > T(0) ? kept_weight - static_cast<double>(votes[1]) : kept_weight;
      s_.consensus_loss = divisor > 0.0 ? static_cast<double>(votes[0]) / divisor : std::numeric_limits<double>::quiet_NaN();
      s_.consensus_round = loss_round;
    }
    if (votes[2] > T(0)) s_.stop_agreed = true;
    if (votes[3] > T(0)) s_.checkpoint_agreed = true;
    out_of_step_ = false;
    for (std::size_t j = 1; j < steps.size(); ++j) out_of_step_ = out_of_step_ || steps[j] != steps[0];
    if (out_of_step_) steps_seen_.assign(steps.begin(), steps.end());
  }
  /// Empty when every worker wrote the reduction just read at the same step, all finishing or
  /// none; else what each was at ("rank 0 at step 10, rank 1 at step 12 (finishing its run)";
  /// steps modulo 2^20).
  [[nodiscard]] std::string out_of_step() const {
    if (!out_of_step_) return {};
    std::string s;
    for (std::size_t j = 0; j < workers_ && j < 16; ++j) {
      const auto v = static_cast<std::size_t>(steps_seen_[j]);
      s += (j ? ", rank " : "rank ") + std::to_string(j) + " at step " + std::to_string((v & (finish_mark - 1)) - 1) +
           ((v & finish_mark) != 0 ? " (finishing its run)" : "");
    }
    return s + (workers_ > 16 ? ", ..." : "");
  }

  template <class Archive>
  void serialize(Archive& a) {
    a("ready_round", s_.ready_round);
    a("ready_loss", s_.ready_loss);
    a("consensus_round", s_.consensus_round);
    a("consensus_loss", s_.consensus_loss);
    a("vote", s_.vote);
    a("stop_agreed", s_.stop_agreed);
    a("checkpoint_vote", s_.checkpoint_vote);
    a("checkpoint_agreed", s_.checkpoint_agreed);
  }

 private:
  static constexpr std::size_t step_mask = (std::size_t{1} << 20) - 1;
  static constexpr std::size_t finish_mark = std::size_t{1} << 21;  // (step & step_mask) + 1 <= 2^20 < finish_mark
  Tally s_{};
  std::size_t workers_ = 0;
  bool out_of_step_ = false;
  std::vector<double> steps_seen_;  // only when out of step: the error is being made
};

}  // namespace cocod::detail
