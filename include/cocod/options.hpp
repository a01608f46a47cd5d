#pragma once
// The settings of a run that every algorithm shares, validated when an algorithm is constructed.
// The settings of one part are that part's: the local update's (update::Sgd: momentum, Nesterov,
// weight decay), the schedule's, and the algorithm's own (Outer, Compress, Fragments, OverlapDepth, PullBack).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cocod/errors.hpp"

namespace cocod {

/// What a run does when a worker's loss, gradient or parameters hold a NaN or an infinity. The
/// worker withholds its contribution from the reduction that would spread it (it sends zeros)
/// and flags itself in the control slots, so every worker learns of it from the same reduction:
///  - raise: every worker throws NonFiniteError (naming the ranks, the round, the step and what
///    was non-finite), its model left at the consensus of the finite contributions;
///  - skip: that reduction's batches are skipped (the average is taken over the finite
///    contributions, a worker whose state is lost restarts from it), counted in the report, and
///    NonFiniteError after max_skips skips without two clean reductions in a row between them;
///  - off: no check (a diverged run's NaN spreads to every model).
enum class NonFinite { raise, skip, off };

/// The run's settings. Cheap to copy; the per-run state lives in the algorithm's parts.
///
/// | field          | meaning                                                        | default |
/// |----------------|----------------------------------------------------------------|---------|
/// | learning_rate  | base step size gamma (> 0); a schedule may scale it per step   | 0.01    |
/// | period         | k, local steps per round (>= 1)                                | 1       |
/// | batch_size     | mini-batch size M of an average worker (>= 1); a batch larger  | 32      |
/// |                | than a shard spans passes (each sample once per pass)          |         |
/// | speeds         | relative worker speeds (> 0), one per worker; empty = all equal| {}      |
/// | seed           | seed of the batch sampling; same seed = bitwise same run       | 0       |
/// | non_finite     | what a NaN or infinity in a loss, a gradient or the parameters | raise   |
/// |                | does: raise, skip or off (enum NonFinite, docs/reliability.md) |         |
/// | max_skips      | with NonFinite::skip, skips in a row before it raises          | 3       |
/// | report_rounds  | rounds kept in Report::rounds, the latest (0: all); callbacks  | 65536   |
/// |                | still see every round, and the medians are the kept rounds'    |         |
/// | data_fingerprint | any number that identifies this worker's data (a hash of its | 0       |
/// |                | files, say): a resume compares it, since cocod cannot see data |         |
struct Options {
  double learning_rate = 0.01;
  std::size_t period = 1;
  std::size_t batch_size = 32;
  std::vector<double> speeds = {};
  std::uint64_t seed = 0;
  NonFinite non_finite = NonFinite::raise;
  std::size_t max_skips = 3;
  std::size_t report_rounds = 65536;
  std::uint64_t data_fingerprint = 0;

  /// The name in messages and checkpoints.
  static constexpr const char* name = "Options";

  /// Throws std::invalid_argument naming the first field that breaks its rule. `workers` is
  /// the communicator's size, needed to check `speeds`.
  void validate(int workers) const {
    auto fail = [](const std::string& field, const std::string& rule, const auto& got) {
      invalid_setting("cocod::Options", field, rule, got);
    };
    if (!(learning_rate > 0.0) || !std::isfinite(learning_rate))
      fail("learning_rate", "must be a finite number > 0", learning_rate);
    if (period == 0) fail("period", "must be >= 1", period);
    if (max_skips == 0) fail("max_skips", "must be >= 1", max_skips);
    if (report_rounds > (std::size_t{1} << 40)) fail("report_rounds", "must be at most 2^40 (0: all)", report_rounds);
    if (batch_size == 0) fail("batch_size", "must be >= 1", batch_size);
    if (!speeds.empty()) {
      if (speeds.size() != static_cast<std::size_t>(workers))
        fail("speeds", "must have one entry per worker (" + std::to_string(workers) + ")",
             std::to_string(speeds.size()) + " entries");
      for (std::size_t i = 0; i < speeds.size(); ++i)
        if (!(speeds[i] > 0.0) || !std::isfinite(speeds[i]))
          fail("speeds[" + std::to_string(i) + "]", "must be a finite number > 0", speeds[i]);
    }
  }

  /// The settings a resumed run must share with the saved one (a checkpoint compares them field
  /// by field); non_finite, max_skips and report_rounds may change.
  template <class Archive>
  void serialize(Archive& a) {
    a("learning_rate", learning_rate);
    a("period", period);
    a("batch_size", batch_size);
    a("speeds", speeds);
    a("seed", seed);
    a("data_fingerprint", data_fingerprint);
  }
};

}  // namespace cocod
