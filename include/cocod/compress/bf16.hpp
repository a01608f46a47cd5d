#pragma once
// The bf16 codec: 2 bytes per element, the top half of an fp32, rounded to nearest even.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "cocod/compress/codec.hpp"

namespace cocod::compress {

/// bf16: 2 bytes per element, no scale (`block` is not used). A double is rounded to float
/// first; its residual is taken against the decoded value all the same. NaN and infinity are
/// kept as they are and leave a residual of 0, so that they do not come back in later rounds.
struct Bf16 {
  static constexpr const char* name = "bf16";
  [[nodiscard]] static std::size_t encoded_bytes(std::size_t n, std::size_t /*block*/) noexcept { return 2 * n; }
  /// Half a unit in the 8th bit, 2^-8 |x| (plus float's own rounding of a double).
  [[nodiscard]] static double error_bound(double x_abs, double /*block_max*/) noexcept {
    return std::ldexp(x_abs, -8) * (1.0 + 1e-6) + 1e-45;
  }

  template <class T>
  class Coder {
   public:
    explicit Coder(std::size_t /*block*/) noexcept {}
    void encode(std::span<T> x, std::span<std::byte> out) const noexcept {
      for (std::size_t i = 0; i < x.size(); ++i) {
        const std::uint16_t h = to_bf16(codec_detail::narrow(x[i]));
        std::memcpy(out.data() + 2 * i, &h, 2);
        const T sent = static_cast<T>(from_bf16(h));
        x[i] = sent - sent == T(0) ? x[i] - sent : T(0);  // (a non-finite value leaves no residual)
      }
    }
    void decode(std::span<const std::byte> in, std::span<T> out, bool accumulate) const noexcept {
      for (std::size_t i = 0; i < out.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, in.data() + 2 * i, 2);
        const auto v = static_cast<T>(from_bf16(h));
        out[i] = accumulate ? out[i] + v : v;
      }
    }
  };
};

}  // namespace cocod::compress
