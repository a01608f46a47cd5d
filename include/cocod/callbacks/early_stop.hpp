#pragma once
// Stops a run when the consensus loss stops improving or reaches a target. It reads only the
// consensus loss, which every worker sees identically, so all workers ask to stop together.
#include <cmath>
#include <cstddef>
#include <limits>

#include "cocod/report.hpp"

namespace cocod::callbacks {

/// Asks to stop after `patience` consensus losses that did not improve on the best by more
/// than `min_delta` (a NaN loss, a diverged run, never improves), or as soon as one is
/// <= `target_loss`:
///
///     cocod::callbacks::EarlyStop{{.patience = 5, .min_delta = 1e-4}}
class EarlyStop {
 public:
  struct Settings {
    std::size_t patience = 10;
    double min_delta = 0.0;
    double target_loss = -std::numeric_limits<double>::infinity();
  };
  EarlyStop() = default;
  explicit EarlyStop(Settings settings) : settings_(settings) {}

  bool on_round(const RoundStats& s) {
    // Before the first consensus there is nothing to judge; after it, NaN counts as no progress.
    if (s.consensus_loss_round == static_cast<std::size_t>(-1) || s.consensus_loss_round == last_seen_) return false;
    last_seen_ = s.consensus_loss_round;
    if (s.consensus_loss <= settings_.target_loss) return true;
    if (s.consensus_loss < best_ - settings_.min_delta) {
      best_ = s.consensus_loss;
      bad_ = 0;
      return false;
    }
    return ++bad_ >= settings_.patience;
  }

 private:
  Settings settings_{};
  double best_ = std::numeric_limits<double>::infinity();
  std::size_t bad_ = 0;
  std::size_t last_seen_ = static_cast<std::size_t>(-1);
};

}  // namespace cocod::callbacks
