#pragma once
// Deterministic batch sampling: the same seed, rank and shard give the same batches on every
// platform (own generator and shuffle; std::shuffle differs between standard libraries).
#include <cstdint>
#include <cstddef>
#include <numeric>
#include <span>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

namespace cocod {

/// xoshiro256** seeded through splitmix64: small, fast, and the same everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) noexcept {
    for (auto& s : state_) s = splitmix64(seed);
  }
  std::uint64_t operator()() noexcept {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  /// Uniform integer in [0, bound), bound > 0, without modulo bias (Lemire's method).
  std::uint64_t below(std::uint64_t bound) noexcept {
    __uint128_t m = static_cast<__uint128_t>((*this)()) * bound;
    auto low = static_cast<std::uint64_t>(m);
    if (low < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<__uint128_t>((*this)()) * bound;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }
  /// Uniform double in [0, 1).
  double uniform() noexcept { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }
  /// False for the all-zero state, which no seed gives and which the generator never leaves
  /// (below() would never return): a checkpoint holding it is corrupt.
  [[nodiscard]] bool valid() const noexcept { return (state_[0] | state_[1] | state_[2] | state_[3]) != 0; }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix64(std::uint64_t& x) noexcept {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t state_[4];
};

/// Draws mini-batches of sample indices from one worker's shard: a fresh random permutation per
/// pass over the shard, batches taken from it in order, a batch that runs past the end of a
/// pass continuing into the next one (so every batch has exactly the requested size). A batch
/// larger than the shard therefore holds samples more than once: it spans several passes, each
/// sample at most once per pass. Allocates only at construction.
class BatchSampler {
 public:
  BatchSampler() = default;
  BatchSampler(std::size_t samples, std::uint64_t seed, int rank)
      : rng_(seed ^ (0x5851f42d4c957f2dULL * (static_cast<std::uint64_t>(rank) + 1))),
        order_(samples) {
    if (samples == 0) throw std::invalid_argument("cocod::BatchSampler: the shard is empty");
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    shuffle();
  }

  /// Fills `batch` with the next batch.size() sample indices.
  void next(std::span<std::size_t> batch) noexcept {
    for (auto& index : batch) {
      if (position_ == order_.size()) {
        shuffle();
        position_ = 0;
        ++passes_;
      }
      index = order_[position_++];
    }
  }

  /// Completed passes over the shard.
  [[nodiscard]] std::size_t passes() const noexcept { return passes_; }

  /// Run state for a checkpoint: the generator, the current pass's permutation and the position
  /// in it; restoring needs a sampler of a shard of the same size.
  template <class Archive>
  void serialize(Archive& a) {
    const std::size_t samples = order_.size();
    a("rng", rng_);
    a("order", order_);
    a("position", position_);
    a("passes", passes_);
    if constexpr (!Archive::saving) {
      if (!rng_.valid()) a.fail("rng", "is all zero, a state the generator never leaves (corrupt)");
      if (order_.size() != samples)
        a.fail("order", "holds a shard of " + std::to_string(order_.size()) + " samples; this worker's has " +
                            std::to_string(samples));
      for (const std::size_t i : order_)
        if (i >= samples) a.fail("order", "holds sample " + std::to_string(i) + ", outside the shard (corrupt)");
      if (position_ > samples) a.fail("position", "is past the end of the shard (corrupt)");
    }
  }

 private:
  void shuffle() noexcept {
    for (std::size_t i = order_.size(); i > 1; --i) {
      const auto j = static_cast<std::size_t>(rng_.below(i));
      std::swap(order_[i - 1], order_[j]);
    }
  }
  Rng rng_{};
  std::vector<std::size_t> order_;
  std::size_t position_ = 0;
  std::size_t passes_ = 0;
};

}  // namespace cocod
