#pragma once
// The hyperparameters every algorithm shares, validated when an optimizer is constructed.
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cocod/compress/format.hpp"
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

/// The outer optimizer of a model-averaging algorithm (Options::outer): SGD with momentum or
/// Nesterov, PyTorch semantics, on each round's pseudo-gradient Delta = z - xbar, the outer
/// model z minus the round's average:
///
///     b = Delta (first step), b = momentum * b + Delta (after);  z = z - learning_rate * g,
///     g = Delta + momentum * b (nesterov) or b
///
/// Local-SGD with it is SlowMo / DiLoCo; CoCoD-SGD applies it to its one-round-stale average
/// and keeps each worker's progress since its snapshot (docs/algorithm.md).
struct Outer {
  double learning_rate = 1.0;  ///< eta > 0
  double momentum = 0.0;       ///< beta in [0, 1)
  bool nesterov = false;       ///< needs momentum > 0

  /// DiLoCo's setting: eta 0.7, beta 0.9, Nesterov.
  [[nodiscard]] static Outer diloco() noexcept { return {0.7, 0.9, true}; }
  /// SlowMo's default: eta 1, beta 0.5, heavy ball.
  [[nodiscard]] static Outer slowmo() noexcept { return {1.0, 0.5, false}; }
};

/// How streamed fragments (Options::fragments > 1) merge the average of a fragment when its
/// exchange lands, a round after its snapshot was posted.
enum class FragmentMerge {
  add_back,  ///< x += z' - a: the progress made while it was in flight is kept (CoCoD's rule)
  lerp,      ///< x = (1 - fragment_alpha) z' + fragment_alpha x (Streaming DiLoCo, torchft)
};

/// Hyperparameters of a run. Cheap to copy; the per-run state lives in the optimizer.
///
/// | field          | meaning                                                        | default |
/// |----------------|----------------------------------------------------------------|---------|
/// | learning_rate  | base step size gamma (> 0); a schedule may scale it per step   | 0.01    |
/// | momentum       | heavy-ball coefficient mu in [0, 1), local to each worker      | 0       |
/// | nesterov       | Nesterov momentum (needs momentum > 0)                         | false   |
/// | weight_decay   | L2 coefficient lambda >= 0, added to the gradient              | 0       |
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
/// | outer          | the outer optimizer (Local-SGD, CoCoD-SGD); none: the plain    | none    |
/// |                | algorithm                                                      |         |
/// | compress       | what an averaging exchange sends: none (the model), bf16, fp16 | none    |
/// |                | or int8 deviations from the outer model, with error feedback   |         |
/// | compress_block | elements per fp32 scale (fp16, int8; >= 1)                     | 256     |
/// | fragments      | F: CoCoD-SGD exchanges one of F equal slices per round (>= 1)  | 1       |
/// | fragment_merge | how a landed fragment merges: add_back or lerp                 | add_back|
/// | fragment_alpha | lerp's weight of the local model, in [0, 1]                    | 0.5     |
/// | pull_alpha     | Overlap-Local-SGD's pull towards the anchor, in (0, 1]         | 0.2     |
/// | anchor_momentum| Overlap-Local-SGD's anchor momentum, in [0, 1)                 | 0       |
struct Options {
  double learning_rate = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  std::size_t period = 1;
  std::size_t batch_size = 32;
  std::vector<double> speeds = {};
  std::uint64_t seed = 0;
  NonFinite non_finite = NonFinite::raise;
  std::size_t max_skips = 3;
  std::size_t report_rounds = 65536;
  std::optional<Outer> outer = std::nullopt;
  Compression compress = Compression::none;
  std::size_t compress_block = 256;
  std::size_t fragments = 1;
  FragmentMerge fragment_merge = FragmentMerge::add_back;
  double fragment_alpha = 0.5;
  double pull_alpha = 0.2;
  double anchor_momentum = 0.0;

  /// The family's settings in one line ("outer 0.7/0.9/nesterov, compress int8/256, fragments
  /// 4/add_back, pull 0.2/0"), for checkpoints and reports.
  [[nodiscard]] std::string family() const {
    char b[256];
    const char* merge = fragment_merge == FragmentMerge::lerp ? "lerp" : "add_back";
    std::string outer_text = "none";
    if (outer) {
      std::snprintf(b, sizeof b, "%.17g/%.17g/%s", outer->learning_rate, outer->momentum, outer->nesterov ? "nesterov" : "heavy-ball");
      outer_text = b;
    }
    std::snprintf(b, sizeof b, "outer %s, compress %s/%zu, fragments %zu/%s/%.17g, pull %.17g/%.17g", outer_text.c_str(),
                  compress::name(compress), compress_block, fragments, merge, fragment_alpha, pull_alpha, anchor_momentum);
    return b;
  }

  /// Throws std::invalid_argument naming the first field that breaks its rule. `workers` is
  /// the communicator's size, needed to check `speeds`.
  void validate(int workers) const {
    auto fail = [](const std::string& field, const std::string& rule, const auto& got) {
      invalid_setting("cocod::Options", field, rule, got);
    };
    if (!(learning_rate > 0.0) || !std::isfinite(learning_rate))
      fail("learning_rate", "must be a finite number > 0", learning_rate);
    if (!(momentum >= 0.0 && momentum < 1.0)) fail("momentum", "must be in [0, 1)", momentum);
    if (nesterov && momentum == 0.0)
      fail("nesterov", "needs momentum > 0", "nesterov = true, momentum = 0");
    if (!(weight_decay >= 0.0) || !std::isfinite(weight_decay))
      fail("weight_decay", "must be a finite number >= 0", weight_decay);
    if (period == 0) fail("period", "must be >= 1", period);
    if (max_skips == 0) fail("max_skips", "must be >= 1", max_skips);
    if (report_rounds > (std::size_t{1} << 40)) fail("report_rounds", "must be at most 2^40 (0: all)", report_rounds);
    if (batch_size == 0) fail("batch_size", "must be >= 1", batch_size);
    if (outer) {
      if (!(outer->learning_rate > 0.0) || !std::isfinite(outer->learning_rate))
        fail("outer.learning_rate", "must be a finite number > 0", outer->learning_rate);
      if (!(outer->momentum >= 0.0 && outer->momentum < 1.0)) fail("outer.momentum", "must be in [0, 1)", outer->momentum);
      if (outer->nesterov && outer->momentum == 0.0)
        fail("outer.nesterov", "needs outer.momentum > 0", "nesterov = true, momentum = 0");
    }
    if (compress_block == 0) fail("compress_block", "must be >= 1", compress_block);
    if (fragments == 0) fail("fragments", "must be >= 1", fragments);
    if (!(fragment_alpha >= 0.0 && fragment_alpha <= 1.0)) fail("fragment_alpha", "must be in [0, 1]", fragment_alpha);
    if (fragment_merge == FragmentMerge::lerp && fragments == 1)
      fail("fragment_merge", "lerp needs fragments > 1 (a whole model merges by CoCoD-SGD's add-back)", "lerp, fragments = 1");
    if (!(pull_alpha > 0.0 && pull_alpha <= 1.0)) fail("pull_alpha", "must be in (0, 1]", pull_alpha);
    if (!(anchor_momentum >= 0.0 && anchor_momentum < 1.0)) fail("anchor_momentum", "must be in [0, 1)", anchor_momentum);
    if (!speeds.empty()) {
      if (speeds.size() != static_cast<std::size_t>(workers))
        fail("speeds", "must have one entry per worker (" + std::to_string(workers) + ")",
             std::to_string(speeds.size()) + " entries");
      for (std::size_t i = 0; i < speeds.size(); ++i)
        if (!(speeds[i] > 0.0) || !std::isfinite(speeds[i]))
          fail("speeds[" + std::to_string(i) + "]", "must be a finite number > 0", speeds[i]);
    }
  }
};

}  // namespace cocod
