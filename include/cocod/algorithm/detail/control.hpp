#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/control.hpp is internal: include <cocod.hpp>"
#endif
// The control slots: a few scalars after the model part of every reduced buffer that, summed
// with it, give every worker the same consensus loss and the same stop decision with no extra
// collective. A measuring schedule's window follows them (see schedule/measurement.hpp).
#include <cstddef>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace cocod::detail {

inline constexpr std::size_t npos = static_cast<std::size_t>(-1);

/// What the control slots of one reduced buffer carry (every worker writes the same tag).
struct ControlTag {
  std::size_t loss_round = npos;  ///< round whose loss they carry, or npos
  bool measured = false;          ///< the schedule's window follows them
};

/// Slots [w_i * (latest complete round's mean loss), stop vote, checkpoint vote], then `extra`
/// slots for the schedule. Owns the host staging of the slots and the run state of losses and votes.
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
  };

  void start(std::size_t extra) {
    staging_.assign(own + extra, T(0));
    s_ = State{};
  }
  /// Slots per reduced buffer.
  [[nodiscard]] std::size_t size() const noexcept { return staging_.size(); }
  /// The schedule's part of the staging, written before store() and read after load().
  [[nodiscard]] std::span<T> extra() noexcept { return std::span<T>(staging_).subspan(own); }

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
  ControlTag write(double weight, bool measured) noexcept {
    staging_[0] = s_.ready_round == npos ? T(0) : static_cast<T>(weight * s_.ready_loss);
    staging_[1] = s_.vote ? T(1) : T(0);
    staging_[2] = std::exchange(s_.checkpoint_vote, false) ? T(1) : T(0);
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
  }

 private:
  std::vector<T> staging_;
  State s_{};
};

}  // namespace cocod::detail
