#pragma once
// The int8 codec: 1 byte per element, symmetric, one fp32 scale per block.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "cocod/compress/codec.hpp"

namespace cocod::compress {

/// int8: 1 byte per element, symmetric, in blocks of `block` elements that share one fp32
/// scale, max |x| / 127; q = round(x / scale) in [-127, 127]. A block holding a NaN or an
/// infinity decodes to NaN and leaves a residual of 0.
struct Int8 {
  static constexpr const char* name = "int8";
  [[nodiscard]] static std::size_t encoded_bytes(std::size_t n, std::size_t block) noexcept {
    return 4 * codec_detail::blocks(n, block) + n;
  }
  /// Half a scale step, max / 254.
  [[nodiscard]] static double error_bound(double /*x_abs*/, double block_max) noexcept {
    return block_max / 254.0 * (1.0 + 1e-4) + 1e-45;
  }

  template <class T>
  class Coder {
   public:
    explicit Coder(std::size_t block) noexcept : block_(block) {}
    void encode(std::span<T> x, std::span<std::byte> out) const noexcept {
      using namespace codec_detail;
      const std::size_t n = x.size(), nb = blocks(n, block_);
      std::byte* data = out.data() + 4 * nb;
      for (std::size_t b = 0; b < nb; ++b) {
        const std::size_t lo = b * block_, hi = std::min(n, lo + block_);
        const float m = max_abs(std::span<const T>(x.data() + lo, hi - lo));
        const float s = std::isfinite(m) ? m / 127.0f : std::numeric_limits<float>::quiet_NaN();
        put_scale(out.data(), b, s);
        for (std::size_t i = lo; i < hi; ++i) {
          const T q = s == 0.0f || std::isnan(s) ? T(0) : std::clamp(std::nearbyint(x[i] / static_cast<T>(s)), T(-127), T(127));
          data[i] = static_cast<std::byte>(static_cast<std::int8_t>(q));
          x[i] = std::isnan(s) ? T(0) : x[i] - q * static_cast<T>(s);
        }
      }
    }
    void decode(std::span<const std::byte> in, std::span<T> out, bool accumulate) const noexcept {
      using namespace codec_detail;
      const std::size_t n = out.size(), nb = blocks(n, block_);
      const std::byte* data = in.data() + 4 * nb;
      for (std::size_t b = 0; b < nb; ++b) {
        const std::size_t lo = b * block_, hi = std::min(n, lo + block_);
        const auto s = static_cast<T>(get_scale(in.data(), b));
        for (std::size_t i = lo; i < hi; ++i) {
          const T v = static_cast<T>(static_cast<std::int8_t>(data[i])) * s;
          out[i] = accumulate ? out[i] + v : v;
        }
      }
    }

   private:
    std::size_t block_;
  };
};

}  // namespace cocod::compress
