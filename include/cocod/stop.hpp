#pragma once
// How long optimize() runs.
#include <cmath>
#include <cstddef>
#include <sstream>
#include <stdexcept>

namespace cocod {

/// Run for this many epochs (passes over the global data set: sum_i n_i samples).
struct Epochs {
  double count = 1.0;
  [[nodiscard]] std::size_t steps(double steps_per_epoch, std::size_t) const {
    if (!(count > 0.0) || !std::isfinite(count)) {
      std::ostringstream os;
      os << "cocod::Epochs: count must be a finite number > 0 (got " << count << ")";
      throw std::invalid_argument(os.str());
    }
    return static_cast<std::size_t>(std::ceil(count * steps_per_epoch));
  }
};
/// Run for this many local steps.
struct Steps {
  std::size_t count = 1;
  [[nodiscard]] std::size_t steps(double, std::size_t) const {
    if (count == 0) throw std::invalid_argument("cocod::Steps: count must be >= 1 (got 0)");
    return count;
  }
};
/// Run for this many rounds of k steps.
struct Rounds {
  std::size_t count = 1;
  [[nodiscard]] std::size_t steps(double, std::size_t period) const {
    if (count == 0) throw std::invalid_argument("cocod::Rounds: count must be >= 1 (got 0)");
    return count * period;
  }
};

}  // namespace cocod
