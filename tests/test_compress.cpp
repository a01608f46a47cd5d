// The codecs of a compressed exchange: each decoded element within its format's error bound,
// rounding to nearest even, and error feedback's identity: what was sent plus the residual is
// what was to be sent.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace {
using cocod::Compression;
constexpr Compression formats[] = {Compression::bf16, Compression::fp16, Compression::int8};

template <class T>
std::vector<T> sample(std::size_t n, std::uint64_t seed, double scale) {
  cocod::Rng rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) {
    // magnitudes over many orders, both signs, some exact zeros
    const double m = std::ldexp(rng.uniform() + 0.5, static_cast<int>(rng.uniform() * 24) - 12);
    x = rng.uniform() < 0.05 ? T(0) : static_cast<T>((rng.uniform() < 0.5 ? -m : m) * scale);
  }
  return v;
}

template <class T>
void check_bound(Compression c, std::size_t n, std::size_t block, double scale) {
  auto x = sample<T>(n, 7 + n, scale);
  const auto original = x;
  std::vector<std::byte> bytes(cocod::compress::encoded_bytes(c, n, block, sizeof(T)));
  cocod::compress::encode(c, std::span<T>(x), block, std::span<std::byte>(bytes));
  std::vector<T> decoded(n);
  cocod::compress::decode(c, std::span<const std::byte>(bytes), block, std::span<T>(decoded));
  for (std::size_t b = 0; b < n; b += block) {
    double block_max = 0;
    for (std::size_t i = b; i < std::min(n, b + block); ++i) block_max = std::max(block_max, std::abs(double(original[i])));
    for (std::size_t i = b; i < std::min(n, b + block); ++i) {
      CAPTURE(i);
      const double err = std::abs(double(original[i]) - double(decoded[i]));
      CHECK(err <= cocod::compress::error_bound(c, std::abs(double(original[i])), block_max));
      CHECK(x[i] == original[i] - decoded[i]);  // the residual is exactly what was lost
    }
  }
}
}  // namespace

TEST_CASE("Each format decodes every element within its error bound, float and double") {
  for (const auto c : formats) {
    const std::string format_name = cocod::compress::name(c);
    CAPTURE(format_name);
    for (const std::size_t n : {1u, 7u, 256u, 1000u})
      for (const std::size_t block : {1u, 32u, 256u}) {
        CAPTURE(n);
        CAPTURE(block);
        check_bound<float>(c, n, block, 1.0);
        check_bound<double>(c, n, block, 1.0);
        check_bound<float>(c, n, block, 1e-20);  // tiny deviations: the block scale keeps them
        check_bound<float>(c, n, block, 1e20);   // and large ones (fp16 alone would overflow)
      }
  }
}

TEST_CASE("Encoded sizes: bf16 2 bytes, fp16 2 + 4/B, int8 1 + 4/B per element") {
  CHECK(cocod::compress::encoded_bytes(Compression::bf16, 1000, 256, 4) == 2000);
  CHECK(cocod::compress::encoded_bytes(Compression::fp16, 1000, 256, 4) == 2000 + 4 * 4);
  CHECK(cocod::compress::encoded_bytes(Compression::int8, 1000, 256, 4) == 1000 + 4 * 4);
  CHECK(cocod::compress::encoded_bytes(Compression::none, 1000, 256, 8) == 8000);
}

TEST_CASE("bf16 and fp16 round to nearest, ties to even, like the hardware conversions") {
  using cocod::compress::from_bf16, cocod::compress::to_bf16, cocod::compress::from_fp16, cocod::compress::to_fp16;
  CHECK(from_bf16(to_bf16(1.0f)) == 1.0f);
  CHECK(from_bf16(to_bf16(1.0f + std::ldexp(1.0f, -8))) == 1.0f);  // a tie: to even (down)
  CHECK(from_bf16(to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))) == 1.0f + std::ldexp(1.0f, -6));  // a tie: to even (up)
  CHECK(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(from_fp16(to_fp16(65504.0f)) == 65504.0f);
  CHECK(std::isinf(from_fp16(to_fp16(65520.0f))));
  CHECK(from_fp16(to_fp16(1.0f + std::ldexp(1.0f, -11))) == 1.0f);  // tie to even
  CHECK(from_fp16(to_fp16(std::ldexp(1.0f, -24))) == std::ldexp(1.0f, -24));  // the smallest subnormal
  CHECK(from_fp16(to_fp16(std::ldexp(1.0f, -26))) == 0.0f);
  // every fp16 value survives a round trip through float
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu)) continue;  // NaNs
    CHECK(to_fp16(from_fp16(static_cast<std::uint16_t>(h))) == h);
  }
}

TEST_CASE("Error feedback: what was sent plus the residual is what was to be sent, over many rounds") {
  for (const auto c : formats) {
    const std::string format_name = cocod::compress::name(c);
    CAPTURE(format_name);
    const std::size_t n = 300, block = 64, rounds = 50;
    std::vector<double> residual(n, 0.0), sent(n, 0.0), wanted(n, 0.0), d(n);
    std::vector<std::byte> bytes(cocod::compress::encoded_bytes(c, n, block, sizeof(double)));
    std::vector<double> decoded(n);
    for (std::size_t r = 0; r < rounds; ++r) {
      const auto delta = sample<double>(n, 100 + r, 1e-3);
      for (std::size_t i = 0; i < n; ++i) {
        wanted[i] += delta[i];
        d[i] = delta[i] + residual[i];
      }
      cocod::compress::encode(c, std::span<double>(d), block, std::span<std::byte>(bytes));
      residual = d;
      cocod::compress::decode(c, std::span<const std::byte>(bytes), block, std::span<double>(decoded));
      for (std::size_t i = 0; i < n; ++i) sent[i] += decoded[i];
    }
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::abs((sent[i] + residual[i]) - wanted[i]));
      scale = std::max(scale, std::abs(wanted[i]));
    }
    CHECK(worst <= 1e-12 * scale);
    // without feedback the error would grow with the rounds; with it, it stays one round's
    double residual_max = 0;
    for (double e : residual) residual_max = std::max(residual_max, std::abs(e));
    CHECK(residual_max < 0.01 * scale);
  }
}

TEST_CASE("A NaN or an infinity is never encoded as a finite value") {
  for (const auto c : formats) {
    const std::string format_name = cocod::compress::name(c);
    CAPTURE(format_name);
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      std::vector<float> x = {1.0f, bad, -2.0f, 0.5f}, decoded(4);
      std::vector<std::byte> bytes(cocod::compress::encoded_bytes(c, 4, 2, sizeof(float)));
      cocod::compress::encode(c, std::span<float>(x), 2, std::span<std::byte>(bytes));
      cocod::compress::decode(c, std::span<const std::byte>(bytes), 2, std::span<float>(decoded));
      CHECK_FALSE(std::isfinite(decoded[1]));
      CHECK(std::isfinite(decoded[2]));  // the next block is untouched
      CHECK(std::isfinite(decoded[3]));
    }
  }
}

namespace {
// The codecs as docs/algorithm.md states them, written from its words alone (blocks of B, each
// scale an fp32 before the elements; int8: s = float(max |x|) / 127 in fp32, q = nearest integer
// of x / s with ties to even, clamped; fp16: s = 2^(e - 15), e = max(ilogb(m) + 1, -111), each
// element the binary16 of float(x / s); bf16: the top 16 bits of float(x), to nearest, ties to
// even). Returns the bytes and the decoded values.
template <class T>
std::pair<std::vector<std::byte>, std::vector<T>> as_documented(Compression c, const std::vector<T>& x, std::size_t B) {
  const std::size_t n = x.size(), blocks = (n + B - 1) / B;
  std::vector<std::byte> bytes;
  std::vector<T> decoded(n);
  auto put = [&](const void* p, std::size_t size) {
    const auto* b = static_cast<const std::byte*>(p);
    bytes.insert(bytes.end(), b, b + size);
  };
  if (c == Compression::bf16) {
    for (std::size_t i = 0; i < n; ++i) {
      const float f = static_cast<float>(x[i]);
      const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
      const float down = std::bit_cast<float>(bits & 0xFFFF0000u), up = std::bit_cast<float>((bits & 0xFFFF0000u) + 0x10000u);
      const double to_down = std::abs(double(f) - double(down)), to_up = std::abs(double(up) - double(f));
      const bool even_down = ((bits >> 16) & 1u) == 0;
      const float r = to_down < to_up || (to_down == to_up && even_down) ? down : up;
      const auto h = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(r) >> 16);
      put(&h, 2);
      decoded[i] = static_cast<T>(r);
    }
    return {bytes, decoded};
  }
  std::vector<float> scales(blocks);
  std::vector<std::byte> elements;
  for (std::size_t b = 0; b < blocks; ++b) {
    T m = T(0);
    for (std::size_t i = b * B; i < std::min(n, (b + 1) * B); ++i) m = std::max(m, std::abs(x[i]));
    const float mf = static_cast<float>(m);
    float s;
    if (c == Compression::int8) s = mf / 127.0f;
    else s = mf == 0.0f ? 0.0f : std::ldexp(1.0f, std::max(std::ilogb(mf) + 1, -111) - 15);
    scales[b] = s;
    for (std::size_t i = b * B; i < std::min(n, (b + 1) * B); ++i) {
      if (c == Compression::int8) {
        const T q = s == 0.0f ? T(0) : std::clamp(std::nearbyint(x[i] / static_cast<T>(s)), T(-127), T(127));
        elements.push_back(static_cast<std::byte>(static_cast<std::int8_t>(q)));
        decoded[i] = q * static_cast<T>(s);
      } else {
        const _Float16 h = s == 0.0f ? _Float16(0) : static_cast<_Float16>(static_cast<float>(x[i] / static_cast<T>(s)));
        const auto hb = std::bit_cast<std::uint16_t>(h);
        elements.push_back(static_cast<std::byte>(hb & 0xFF));
        elements.push_back(static_cast<std::byte>(hb >> 8));
        decoded[i] = static_cast<T>(static_cast<float>(h)) * static_cast<T>(s);
      }
    }
  }
  for (const float s : scales) put(&s, 4);
  bytes.insert(bytes.end(), elements.begin(), elements.end());
  return {bytes, decoded};
}

template <class T>
void check_documented(Compression c) {
  auto x = sample<T>(203, 41, 3.0);
  for (std::size_t i = 0; i < 16; ++i) x[i] = T(static_cast<double>(i) - 7.5);  // ties: int8's scale is 1 in this block
  x[8] = T(127);
  const std::size_t B = 16;
  const auto [bytes, decoded] = as_documented(c, x, B);
  auto residual = x;
  std::vector<std::byte> got(cocod::compress::encoded_bytes(c, x.size(), B, sizeof(T)));
  cocod::compress::encode(c, std::span<T>(residual), B, std::span<std::byte>(got));
  std::vector<T> back(x.size());
  cocod::compress::decode(c, std::span<const std::byte>(got), B, std::span<T>(back));
  CHECK(got == bytes);
  CHECK(back == decoded);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(residual[i] == x[i] - decoded[i]);
}
}  // namespace

TEST_CASE("Every format's bytes and values are what docs/algorithm.md says, to the bit, float and double") {
  for (const Compression c : formats) {
    CAPTURE(cocod::compress::name(c));
    check_documented<float>(c);
    check_documented<double>(c);
  }
}
