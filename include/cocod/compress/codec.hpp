#pragma once
// Encoding and decoding of a compressed exchange (host memory). Every format rounds to nearest
// (ties to even), so that encoding is a pure function of the input: every worker that decodes
// the same bytes gets the same values, bit for bit.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>

#include "cocod/compress/format.hpp"

namespace cocod::compress {

// ---- the scalar formats ---------------------------------------------------------------------

/// bf16 of f, rounded to nearest even (NaN stays NaN).
[[nodiscard]] inline std::uint16_t to_bf16(float f) noexcept {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}
[[nodiscard]] inline float from_bf16(std::uint16_t h) noexcept { return std::bit_cast<float>(std::uint32_t{h} << 16); }

/// IEEE binary16 of f, rounded to nearest even; beyond the range: infinity.
[[nodiscard]] inline std::uint16_t to_fp16(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return static_cast<std::uint16_t>(sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds to >= 65520: infinity
  if (a < 0x38800000u) {                                                    // below 2^-14: subnormal
    const float scaled = std::bit_cast<float>(a) * 16777216.0f;              // * 2^24, exact
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(scaled)));
  }
  std::uint32_t h = ((((a >> 23) - 127u + 15u) << 10) | ((a & 0x7FFFFFu) >> 13));
  const std::uint32_t rest = a & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent, as it should
  return static_cast<std::uint16_t>(sign | h);
}
[[nodiscard]] inline float from_fp16(std::uint16_t h) noexcept {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
    return sign ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7F800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e - 15u + 127u) << 23) | (m << 13));
}

namespace codec_detail {
// float of v; beyond float's range (a double) an infinity, not undefined behaviour
template <class T>
float narrow(T v) noexcept {
  if constexpr (sizeof(T) > sizeof(float)) {
    constexpr T big = static_cast<T>(std::numeric_limits<float>::max());
    if (v > big) return std::numeric_limits<float>::infinity();
    if (v < -big) return -std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(v);
}
// max |x|, or NaN when an element is not finite (the block's scale is then NaN, so that the
// block decodes to NaN: a non-finite value is never turned into a finite one).
template <class T>
float max_abs(std::span<const T> x) noexcept {
  T m = T(0);
  bool finite = true;
  for (const T v : x) {
    m = std::max(m, std::abs(v));
    finite = finite && v - v == T(0);
  }
  return finite ? narrow(m) : std::numeric_limits<float>::quiet_NaN();
}
// fp16's block scale: a power of two 2^(e - 15) with max |x| < 2^e, so that x / scale is exact
// and below 2^15, inside fp16's range (65504); at least 2^-126, a normal float.
inline float fp16_scale(float max_abs) noexcept {
  if (max_abs == 0.0f) return 0.0f;
  if (!std::isfinite(max_abs)) return std::numeric_limits<float>::quiet_NaN();  // (also a double beyond float's range)
  const int e = std::max(std::ilogb(max_abs) + 1, -111);
  return std::ldexp(1.0f, e - 15);
}
inline void put_scale(std::byte* out, std::size_t b, float s) noexcept { std::memcpy(out + 4 * b, &s, 4); }
inline float get_scale(const std::byte* in, std::size_t b) noexcept {
  float s;
  std::memcpy(&s, in + 4 * b, 4);
  return s;
}
inline std::size_t blocks(std::size_t n, std::size_t block) noexcept { return (n + block - 1) / block; }
}  // namespace codec_detail

/// Encodes x (n elements, blocks of `block`) into out (encoded_bytes(c, n, block) bytes) and
/// leaves in x what the rounding lost, x - D(Q(x)): the error feedback's residual. Not for
/// Compression::none. A double is rounded to float before bf16 and fp16; its residual is
/// taken against the decoded value all the same. A block holding a NaN or an infinity decodes
/// to NaN (bf16 keeps each value as it is): compression never hides a diverged model; such a
/// value leaves a residual of 0, so that it does not come back in later rounds.
template <class T>
void encode(Compression c, std::span<T> x, std::size_t block, std::span<std::byte> out) {
  using namespace codec_detail;
  const std::size_t n = x.size();
  if (c == Compression::none || block == 0 || out.size() != encoded_bytes(c, n, block, sizeof(T)))
    throw std::logic_error("cocod::compress::encode: bad format, block or output size");
  std::byte* o = out.data();
  if (c == Compression::bf16) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint16_t h = to_bf16(narrow(x[i]));
      std::memcpy(o + 2 * i, &h, 2);
      const T sent = static_cast<T>(from_bf16(h));
      x[i] = sent - sent == T(0) ? x[i] - sent : T(0);  // (a non-finite value leaves no residual)
    }
    return;
  }
  const std::size_t nb = blocks(n, block);
  std::byte* data = o + 4 * nb;
  for (std::size_t b = 0; b < nb; ++b) {
    const std::size_t lo = b * block, hi = std::min(n, lo + block);
    const float m = max_abs(std::span<const T>(x.data() + lo, hi - lo));
    if (c == Compression::fp16) {
      const float s = fp16_scale(m);
      put_scale(o, b, s);
      for (std::size_t i = lo; i < hi; ++i) {
        const std::uint16_t h = s == 0.0f || std::isnan(s) ? std::uint16_t{0} : to_fp16(narrow(x[i] / static_cast<T>(s)));
        std::memcpy(data + 2 * i, &h, 2);
        x[i] = std::isnan(s) ? T(0) : x[i] - static_cast<T>(from_fp16(h)) * static_cast<T>(s);
      }
    } else {  // int8, symmetric: scale = max |x| / 127, q = round(x / scale) in [-127, 127]
      const float s = std::isfinite(m) ? m / 127.0f : std::numeric_limits<float>::quiet_NaN();
      put_scale(o, b, s);
      for (std::size_t i = lo; i < hi; ++i) {
        const T q = s == 0.0f || std::isnan(s) ? T(0) : std::clamp(std::nearbyint(x[i] / static_cast<T>(s)), T(-127), T(127));
        data[i] = static_cast<std::byte>(static_cast<std::int8_t>(q));
        x[i] = std::isnan(s) ? T(0) : x[i] - q * static_cast<T>(s);
      }
    }
  }
}

/// out = D(in), the n = out.size() values that `in` encodes; with `accumulate`, out += D(in).
template <class T>
void decode(Compression c, std::span<const std::byte> in, std::size_t block, std::span<T> out, bool accumulate = false) {
  using namespace codec_detail;
  const std::size_t n = out.size();
  if (c == Compression::none || block == 0 || in.size() != encoded_bytes(c, n, block, sizeof(T)))
    throw std::logic_error("cocod::compress::decode: bad format, block or input size");
  const std::byte* p = in.data();
  auto put = [&](std::size_t i, T v) { out[i] = accumulate ? out[i] + v : v; };
  if (c == Compression::bf16) {
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      put(i, static_cast<T>(from_bf16(h)));
    }
    return;
  }
  const std::size_t nb = blocks(n, block);
  const std::byte* data = p + 4 * nb;
  for (std::size_t b = 0; b < nb; ++b) {
    const std::size_t lo = b * block, hi = std::min(n, lo + block);
    const auto s = static_cast<T>(get_scale(p, b));
    for (std::size_t i = lo; i < hi; ++i) {
      if (c == Compression::fp16) {
        std::uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        put(i, static_cast<T>(from_fp16(h)) * s);
      } else {
        put(i, static_cast<T>(static_cast<std::int8_t>(data[i])) * s);
      }
    }
  }
}

/// The most a block's element can lose in one encoding: |x - D(Q(x))| <= bound(c, |x|, max |x|
/// of its block). bf16: half a unit in the 8th bit, 2^-8 |x| (plus float's own rounding of a
/// double); fp16: 2^-11 |x|, and at least half fp16's smallest step times the scale; int8: half
/// a scale step, max / 254.
[[nodiscard]] inline double error_bound(Compression c, double x_abs, double block_max) noexcept {
  switch (c) {
    case Compression::bf16: return std::ldexp(x_abs, -8) * (1.0 + 1e-6) + 1e-45;
    case Compression::fp16: {
      const double s = codec_detail::fp16_scale(static_cast<float>(block_max));
      return std::ldexp(x_abs, -11) * (1.0 + 1e-6) + std::ldexp(s, -25) + 1e-45;
    }
    case Compression::int8: return block_max / 254.0 * (1.0 + 1e-4) + 1e-45;
    default: return 0.0;
  }
}

}  // namespace cocod::compress
