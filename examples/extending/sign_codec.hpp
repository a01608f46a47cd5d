#pragma once
// A codec of one's own: the scaled sign (docs/extending.md). Each element travels as its sign,
// one bit, and each block of elements as one fp32 scale, the mean of its |x|; the error
// feedback keeps what the sign lost for the next round.
#include <cocod.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <span>

struct SignCodec {
  static constexpr const char* name = "sign";  // in messages
  // Bytes for n elements in blocks of `block`: the scales, then the signs, 8 to a byte.
  static std::size_t encoded_bytes(std::size_t n, std::size_t block) { return 4 * ((n + block - 1) / block) + (n + 7) / 8; }

  // The per-run state of one worker and scalar type (this codec keeps none between calls).
  template <class T>
  class Coder {
   public:
    explicit Coder(std::size_t block) : block_(block) {}
    // Writes x's encoding into out and leaves in x what it lost, x - D(Q(x)).
    void encode(std::span<T> x, std::span<std::byte> out) const {
      const std::size_t blocks = (x.size() + block_ - 1) / block_;
      std::byte* signs = out.data() + 4 * blocks;
      std::memset(signs, 0, (x.size() + 7) / 8);
      for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t lo = b * block_, hi = std::min(x.size(), lo + block_);
        T sum = 0;
        for (std::size_t i = lo; i < hi; ++i) sum += std::abs(x[i]);
        float scale = static_cast<float>(sum / static_cast<T>(hi - lo));
        if (!std::isfinite(scale)) scale = std::numeric_limits<float>::quiet_NaN();  // a diverged block decodes to NaN
        std::memcpy(out.data() + 4 * b, &scale, 4);
        for (std::size_t i = lo; i < hi; ++i) {
          const bool negative = x[i] < T(0);
          if (negative) signs[i / 8] |= std::byte{1} << (i % 8);
          x[i] = std::isnan(scale) ? T(0) : x[i] - (negative ? -scale : scale);
        }
      }
    }
    // out = D(in), or out += D(in) with `accumulate`.
    void decode(std::span<const std::byte> in, std::span<T> out, bool accumulate) const {
      const std::size_t blocks = (out.size() + block_ - 1) / block_;
      const std::byte* signs = in.data() + 4 * blocks;
      for (std::size_t b = 0; b < blocks; ++b) {
        float scale;
        std::memcpy(&scale, in.data() + 4 * b, 4);
        for (std::size_t i = b * block_; i < std::min(out.size(), (b + 1) * block_); ++i) {
          const T v = (signs[i / 8] & (std::byte{1} << (i % 8))) != std::byte{0} ? -T(scale) : T(scale);
          out[i] = accumulate ? out[i] + v : v;
        }
      }
    }

   private:
    std::size_t block_;
  };
};
static_assert(cocod::compress::Codec<SignCodec>);
