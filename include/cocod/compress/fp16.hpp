#pragma once
// The fp16 codec: 2 bytes per element, in blocks that share one fp32 scale (a power of two).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>

#include "cocod/compress/codec.hpp"

namespace cocod::compress {

/// fp16: 2 bytes per element, in blocks of `block` elements that share one fp32 scale, a power
/// of two, so that deviations never leave fp16's range. A block holding a NaN or an infinity
/// decodes to NaN and leaves a residual of 0.
struct Fp16 {
  static constexpr const char* name = "fp16";
  [[nodiscard]] static std::size_t encoded_bytes(std::size_t n, std::size_t block) noexcept {
    return 4 * codec_detail::blocks(n, block) + 2 * n;
  }
  /// The block's scale: 2^(e - 15) with max |x| < 2^e, so that x / scale is exact and below
  /// 2^15, inside fp16's range (65504); at least 2^-126, a normal float.
  [[nodiscard]] static float scale(float max_abs) noexcept {
    if (max_abs == 0.0f) return 0.0f;
    if (!std::isfinite(max_abs)) return std::numeric_limits<float>::quiet_NaN();  // (also a double beyond float's range)
    const int e = std::max(std::ilogb(max_abs) + 1, -111);
    return std::ldexp(1.0f, e - 15);
  }
  /// 2^-11 |x|, and at least half fp16's smallest step times the scale.
  [[nodiscard]] static double error_bound(double x_abs, double block_max) noexcept {
    return std::ldexp(x_abs, -11) * (1.0 + 1e-6) + std::ldexp(scale(static_cast<float>(block_max)), -25) + 1e-45;
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
        const float s = scale(max_abs(std::span<const T>(x.data() + lo, hi - lo)));
        put_scale(out.data(), b, s);
        for (std::size_t i = lo; i < hi; ++i) {
          const std::uint16_t h = s == 0.0f || std::isnan(s) ? std::uint16_t{0} : to_fp16(narrow(x[i] / static_cast<T>(s)));
          std::memcpy(data + 2 * i, &h, 2);
          x[i] = std::isnan(s) ? T(0) : x[i] - static_cast<T>(from_fp16(h)) * static_cast<T>(s);
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
          std::uint16_t h;
          std::memcpy(&h, data + 2 * i, 2);
          const T v = static_cast<T>(from_fp16(h)) * s;
          out[i] = accumulate ? out[i] + v : v;
        }
      }
    }

   private:
    std::size_t block_;
  };
};

}  // namespace cocod::compress
