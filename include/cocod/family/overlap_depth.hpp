#pragma once
// CoCoD-SGD's overlap depth: how many of a round's k local steps its exchange overlaps, and so
// how stale the progress it merges is.
#include <algorithm>
#include <cstddef>
#include <limits>

namespace cocod {

/// CoCoD-SGD's overlap depth tau: the snapshot is taken after step k - tau of each round and its
/// exchange overlaps the round's last tau steps; the round's end merges it by add-back, so the
/// progress merged is tau steps stale, not k. Round time k c + max(0, m - tau c) for a step's
/// compute c and an exchange's time m.
///
/// | field | meaning                                                                    | default     |
/// |-------|----------------------------------------------------------------------------|-------------|
/// | steps | tau; at least the period (whole_round): CoCoD-SGD's whole-round overlap;    | whole_round |
/// |       | automatic: the measured smallest tau with tau c >= m (schedule::Adaptive)  |             |
///
/// tau >= k is CoCoD-SGD bit for bit (with Outer, Compress and Fragments alike); tau = 0 waits
/// for the exchange at the round's end, which without fragments is Local-SGD (with Outer:
/// SlowMo, DiLoCo) up to rounding. The automatic depth follows the schedule's measurements
/// (RunInfo::hiding_steps: c and m as --period auto measures them, with its margin), capped at
/// k and re-planned with the period; until the first measurement it overlaps the whole round.
struct OverlapDepth {
  /// The whole round, whatever the period: CoCoD-SGD's own overlap.
  static constexpr std::size_t whole_round = std::numeric_limits<std::size_t>::max();
  /// The measured depth: the fewest steps that hide one exchange (needs a measuring schedule).
  static constexpr std::size_t automatic = whole_round - 1;
  /// tau, the steps the exchange overlaps.
  std::size_t steps = whole_round;

  /// The name in messages and checkpoints.
  static constexpr const char* name = "OverlapDepth";
  /// Every value is valid (steps beyond the period overlap the whole round); automatic needs a
  /// measuring schedule, which the algorithm checks.
  void validate() const noexcept {}
  /// True when tau is measured (steps == automatic).
  [[nodiscard]] bool is_automatic() const noexcept { return steps == automatic; }
  /// tau for a round of k steps, where `hiding` steps hide one exchange as measured (0: not yet).
  [[nodiscard]] std::size_t at(std::size_t k, std::size_t hiding = 0) const noexcept {
    if (is_automatic()) return hiding == 0 ? k : std::min(hiding, k);
    return std::min(steps, k);
  }
  /// True when the exchange overlaps a whole round of k steps (CoCoD-SGD's own rule).
  [[nodiscard]] bool whole(std::size_t k, std::size_t hiding = 0) const noexcept { return at(k, hiding) >= k; }
  /// The fields a resumed run must share with the saved one.
  template <class Archive>
  void serialize(Archive& a) {
    a("steps", steps);
  }
};

}  // namespace cocod
