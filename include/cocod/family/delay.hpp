#pragma once
// DiLoCo with delayed outer gradients: how a worker starts each round while the average of the
// last round's progress is still in flight.
#include "cocod/errors.hpp"

namespace cocod {

/// Where a worker of cocod::DelayedDiLoCo starts each round.
enum class OuterStart {
  eager,    ///< from its own outer step on the estimate Pbar(r-1) + w_i (P_i(r) - P_i(r-1)) (Kale et al.)
  delayed,  ///< from the shared outer model, one round behind (the naive delay, the control)
};

/// "eager" or "delayed".
[[nodiscard]] inline const char* to_string(OuterStart s) noexcept { return s == OuterStart::delayed ? "delayed" : "eager"; }

/// DiLoCo with delayed outer gradients (Kale, Douillard and Donchev 2025): each round's progress
/// is averaged while the next round runs and moves the shared outer model one round late.
///
/// | field | meaning                                                              | default |
/// |-------|----------------------------------------------------------------------|---------|
/// | start | eager: each worker's own outer step on its estimate of the average;  | eager   |
/// |       | delayed: the shared outer model, one round behind                    |         |
struct Delay {
  OuterStart start = OuterStart::eager;

  /// The name in messages and checkpoints.
  static constexpr const char* name = "Delay";
  /// Throws std::invalid_argument naming the field that breaks its rule.
  void validate() const {
    if (start != OuterStart::eager && start != OuterStart::delayed)
      invalid_setting("cocod::Delay", "start", "must be OuterStart::eager or OuterStart::delayed", static_cast<int>(start));
  }
  /// The fields a resumed run must share with the saved one.
  template <class Archive>
  void serialize(Archive& a) {
    a("start", start);
  }
};

}  // namespace cocod
