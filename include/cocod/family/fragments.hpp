#pragma once
// Streamed fragments (Streaming DiLoCo): the model cut into F fragments, one exchanged per round
// in turn, and how a fragment that lands merges into the model. Fragments are settings of
// CoCoD-SGD; the rotation is the part that owns the fragments' offsets and whose turn it is.
#include <cstddef>
#include <string>

#include "cocod/errors.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/detail/partition.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod {

/// How a fragment merges when its exchange lands, a round after its snapshot was posted.
enum class FragmentMerge {
  add_back,  ///< x += z' - a: the progress made while it was in flight is kept (CoCoD's rule)
  lerp,      ///< x = (1 - alpha) z' + alpha x (Streaming DiLoCo, torchft)
};

/// "add_back" or "lerp".
[[nodiscard]] inline const char* to_string(FragmentMerge m) noexcept { return m == FragmentMerge::lerp ? "lerp" : "add_back"; }

/// CoCoD-SGD's streamed fragments: the parameters in `count` equal slices, of which round r
/// exchanges slice r mod count; each is still overlapped with one round of local steps, so it
/// syncs every `count` rounds with the progress of those rounds.
///
/// | field | meaning                                                       | default  |
/// |-------|---------------------------------------------------------------|----------|
/// | count | F >= 1, at most the parameter count; 1: the whole model       | 1        |
/// | merge | add_back, or lerp (needs count > 1)                           | add_back |
/// | alpha | lerp's weight of the local model, in [0, 1]                   | 0.5      |
struct Fragments {
  std::size_t count = 1;
  FragmentMerge merge = FragmentMerge::add_back;
  double alpha = 0.5;

  /// The name in messages and checkpoints.
  static constexpr const char* name = "Fragments";
  /// Throws std::invalid_argument naming the field that breaks its rule.
  void validate() const {
    if (count == 0) invalid_setting("cocod::Fragments", "count", "must be >= 1", count);
    if (!(alpha >= 0.0 && alpha <= 1.0)) invalid_setting("cocod::Fragments", "alpha", "must be in [0, 1]", alpha);
    if (merge == FragmentMerge::lerp && count == 1)
      invalid_setting("cocod::Fragments", "merge", "lerp needs count > 1 (a whole model merges by CoCoD-SGD's add-back)",
                      "lerp, count = 1");
  }
  /// The fields a resumed run must share with the saved one.
  template <class Archive>
  void serialize(Archive& a) {
    a("count", count);
    a("merge", merge);
    a("alpha", alpha);
  }
};

/// A piece of the model: `size` parameters at `offset`, fragment `index` of `pieces` (an
/// exchange prepared with ExchangeSpec::pieces posts one at a time: Exchange::use).
struct Piece {
  std::size_t offset = 0, size = 0, index = 0;
};

namespace detail {

/// The fragments of n parameters, fragment f = [f n / F, (f + 1) n / F) (the library's one
/// partition), and whose turn it is: the fragment posted next or in flight.
class Rotation {
 public:
  Rotation() = default;
  Rotation(std::size_t n, std::size_t count) : n_(n), count_(count) {}

  [[nodiscard]] std::size_t count() const noexcept { return count_; }
  /// Fragment f.
  [[nodiscard]] Piece piece(std::size_t f) const noexcept {
    const auto [lo, hi] = part(f, n_, count_);
    return {lo, hi - lo, f};
  }
  /// The fragment whose turn it is.
  [[nodiscard]] Piece current() const noexcept { return piece(turn_); }
  /// The largest fragment.
  [[nodiscard]] std::size_t capacity() const noexcept { return (n_ + count_ - 1) / count_; }
  /// Gives the turn to fragment f.
  void turn_to(std::size_t f) noexcept { turn_ = f; }
  /// The fragment after the current one.
  [[nodiscard]] std::size_t next() const noexcept { return (turn_ + 1) % count_; }

  template <class Archive>
  void serialize(Archive& a) {
    a("fragment", turn_);
    if constexpr (!Archive::saving)
      if (turn_ >= count_) a.fail("fragment", "is not a fragment of this run (corrupt)");
  }

 private:
  std::size_t n_ = 0, count_ = 1, turn_ = 0;
};

}  // namespace detail
}  // namespace cocod
