#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/control.hpp is internal: include <cocod.hpp>"
#endif
// The control slots: a few scalars after the model part of every reduced buffer that, summed
// with it, give every worker the same consensus loss and the same stop decision with no extra
// collective. A measuring schedule's window follows them (see schedule/measurement.hpp).
#include <cstddef>
#include <limits>
#include <algorithm>
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
};

/// Slots [w_i * (latest complete round's mean loss), stop vote, checkpoint vote], N slots in which
/// each worker writes the step it is at (workers out of step are an error on every worker), with
/// the non-finite guard 2N + 1 more [what worker j found (0: nothing, 1: a loss, 2: its
/// contribution), 1 + the step it found it at, the summed weights of the workers that did not],
/// then `extra` slots for the schedule. Owns the host staging of the slots and the run state of losses and votes.
template <class T>
class ControlSlots {
 public:
  static constexpr std::size_t own = 3;

  /// Run state: the loss waiting to be sent, the consensus that arrived, the votes.
  struct State {
    std::size_t ready_round = npos;  ///< the round whose mean loss waits to be sent
    double ready_loss = 0.0;
    std::size_t consensus_round = npos;  ///< the round of the latest consensus loss
    double consensus_loss = std::numeric_limits<double>::quiet_NaN();
    bool vote = false;         ///< this worker asked to stop
    bool stop_agreed = false;  ///< some worker's request has arrived
    bool checkpoint_vote = false;    ///< this worker asks for a checkpoint (sent once)
    bool checkpoint_agreed = false;  ///< some worker's request for a checkpoint has arrived
    int found = 0;                   ///< this worker found a non-finite value: 1 a loss, 2 its contribution
    std::size_t found_step = 0;
    std::size_t skips = 0;           ///< skips since two clean reductions in a row
    std::size_t clean = 0;           ///< clean reductions in a row
  };
  /// A worker that withheld its contribution from the latest reduction, and why.
  struct Withheld {
    std::size_t rank = 0;
    int what = 0;  ///< 1: a loss, 2: the contribution itself
    std::size_t step = 0;
  };

  /// `guarded`: the run checks for non-finite values, for `workers` workers.
  void start(bool guarded, std::size_t workers, std::size_t extra) {
    workers_ = workers;
    guard_ = guarded ? workers : 0;
    staging_.assign(own + workers_ + guard_slots() + extra, T(0));
    s_ = State{};
    withheld_.clear();
    withheld_.reserve(guard_);
  }
  /// Slots per reduced buffer.
  [[nodiscard]] std::size_t size() const noexcept { return staging_.size(); }
  /// The schedule's part of the staging, written before store() and read after load().
  [[nodiscard]] std::span<T> extra() noexcept { return std::span<T>(staging_).subspan(own + workers_ + guard_slots()); }

  /// This worker found a NaN or an infinity (`what` 1: in a loss, 2: in its contribution) at
  /// `step`; the first one counts until the next reduction reports it.
  void non_finite(int what, std::size_t step) noexcept {
    if (s_.found != 0) return;
    s_.found = what;
    s_.found_step = step;
  }
  /// True when this worker has found a non-finite value not yet reported: its next
  /// contribution must be withheld.
  [[nodiscard]] bool found() const noexcept { return s_.found != 0; }
  /// Forgets this worker's finding: the state it was about has been replaced.
  void forget() noexcept { s_.found = 0; }
  /// Empty when every worker wrote the reduction just read at the same step; else what each was
  /// at ("rank 0 at step 10, rank 1 at step 12"; steps modulo 2^20).
  [[nodiscard]] std::string out_of_step() const {
    if (!out_of_step_) return {};
    std::string s;
    const T* steps = staging_.data() + own;
    for (std::size_t j = 0; j < workers_ && j < 16; ++j)
      s += (j ? ", rank " : "rank ") + std::to_string(j) + " at step " + std::to_string(static_cast<std::size_t>(steps[j]) - 1);
    return s + (workers_ > 16 ? ", ..." : "");
  }
  /// The workers that withheld their contribution from the latest reduction (empty: none).
  [[nodiscard]] const std::vector<Withheld>& withheld() const noexcept { return withheld_; }
  /// The summed weights of the workers that did not (1 when none withheld).
  [[nodiscard]] double kept_weight() const noexcept { return kept_weight_; }
  /// Counts a skip; returns the consecutive ones.
  std::size_t skipped() noexcept { return ++s_.skips; }
  void clear_withheld() noexcept { withheld_.clear(); }

  /// The mean loss of `round` is ready to travel with the next reduced buffer.
  void loss_ready(std::size_t round, double mean_loss) noexcept {
    s_.ready_round = round;
    s_.ready_loss = mean_loss;
  }
  void vote() noexcept { s_.vote = true; }
  void vote_checkpoint() noexcept { s_.checkpoint_vote = true; }
  /// The checkpoint that was asked for is taken.
  void checkpoint_taken() noexcept { s_.checkpoint_agreed = false; }

  /// Fills the own slots of the staging (the extra ones are the schedule's); returns the tag.
  ControlTag write(double weight, bool measured, std::size_t rank, std::size_t step) noexcept {
    // (a worker that withholds its contribution sends no loss either: it may be the NaN)
    staging_[0] = s_.ready_round == npos || (guard_ > 0 && s_.found != 0) ? T(0) : static_cast<T>(weight * s_.ready_loss);
    staging_[1] = s_.vote ? T(1) : T(0);
    staging_[2] = std::exchange(s_.checkpoint_vote, false) ? T(1) : T(0);
    T* steps = staging_.data() + own;
    std::fill(steps, steps + workers_, T(0));
    steps[rank] = static_cast<T>((step & step_mask) + 1);  // exact in a float
    if (guard_ > 0) {
      T* g = staging_.data() + own + workers_;
      std::fill(g, g + guard_slots(), T(0));
      if (s_.found != 0) {
        g[rank] = static_cast<T>(s_.found);
        g[guard_ + rank] = static_cast<T>((s_.found_step & step_mask) + 1);  // exact in a float
        s_.found = 0;  // reported
      } else {
        g[2 * guard_] = static_cast<T>(weight);
      }
    }
    return ControlTag{s_.ready_round, measured};
  }
  /// Reads the own slots of the staging after a reduction.
  void read(ControlTag tag) noexcept {
    if (tag.loss_round != npos) {
      s_.consensus_loss = static_cast<double>(staging_[0]);
      s_.consensus_round = tag.loss_round;
    }
    if (staging_[1] > T(0)) s_.stop_agreed = true;
    if (staging_[2] > T(0)) s_.checkpoint_agreed = true;
    out_of_step_ = false;
    const T* steps = staging_.data() + own;
    for (std::size_t j = 1; j < workers_; ++j) out_of_step_ = out_of_step_ || steps[j] != steps[0];
    withheld_.clear();
    kept_weight_ = 1.0;
    if (guard_ > 0) {
      const T* g = staging_.data() + own + workers_;
      for (std::size_t j = 0; j < guard_; ++j)
        if (g[j] > T(0))
          withheld_.push_back({j, static_cast<int>(g[j]), static_cast<std::size_t>(g[guard_ + j]) - 1});
      // Skips count as "in a row" until two clean reductions in a row: under CoCoD-SGD a
      // worker's NaN surfaces one round after the reduction that follows its replacement.
      if (withheld_.empty()) {
        if (++s_.clean >= 2) s_.skips = 0;
      } else {
        s_.clean = 0;
        kept_weight_ = static_cast<double>(g[2 * guard_]);
        // the consensus loss of the workers that sent one
        if (tag.loss_round != npos) s_.consensus_loss = kept_weight_ > 0.0 ? s_.consensus_loss / kept_weight_ : s_.consensus_loss;
      }
    }
  }

  /// The staging, to copy to and from the tail of a reduced buffer.
  [[nodiscard]] std::span<T> staging() noexcept { return staging_; }

  [[nodiscard]] const State& state() const noexcept { return s_; }
  void restore(const State& s) noexcept { s_ = s; }
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
    a("found", s_.found);
    a("found_step", s_.found_step);
    a("skips", s_.skips);
    a("clean", s_.clean);
  }

 private:
  [[nodiscard]] std::size_t guard_slots() const noexcept { return guard_ > 0 ? 2 * guard_ + 1 : 0; }
  static constexpr std::size_t step_mask = (std::size_t{1} << 20) - 1;

  std::vector<T> staging_;
  State s_{};
  std::size_t workers_ = 0;
  std::size_t guard_ = 0;  // workers, when guarded
  bool out_of_step_ = false;
  std::vector<Withheld> withheld_;
  double kept_weight_ = 1.0;
};

}  // namespace cocod::detail
