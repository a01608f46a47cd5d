#pragma once
// Overlap-Local-SGD's settings: how hard the models are pulled towards the anchor, and the
// anchor's momentum.
#include <cmath>

#include "cocod/errors.hpp"

namespace cocod {

/// Overlap-Local-SGD's pull-back (Wang, Liang and Joshi, ICASSP 2020).
///
/// | field           | meaning                                        | default |
/// |-----------------|------------------------------------------------|---------|
/// | alpha           | the pull towards the anchor, in (0, 1]         | 0.2     |
/// | anchor_momentum | the anchor's momentum, in [0, 1)               | 0       |
struct PullBack {
  double alpha = 0.2;
  double anchor_momentum = 0.0;

  /// The name in messages and checkpoints.
  static constexpr const char* name = "PullBack";
  /// Throws std::invalid_argument naming the field that breaks its rule.
  void validate() const {
    if (!(alpha > 0.0 && alpha <= 1.0)) invalid_setting("cocod::PullBack", "alpha", "must be in (0, 1]", alpha);
    if (!(anchor_momentum >= 0.0 && anchor_momentum < 1.0))
      invalid_setting("cocod::PullBack", "anchor_momentum", "must be in [0, 1)", anchor_momentum);
  }
  /// The fields a resumed run must share with the saved one.
  template <class Archive>
  void serialize(Archive& a) {
    a("alpha", alpha);
    a("anchor_momentum", anchor_momentum);
  }
};

}  // namespace cocod
