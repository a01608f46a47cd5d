#pragma once
// What a codec of the compressed exchange is (the Codec concept), the pieces the built-in
// codecs share (the scalar formats, the block scales), and a codec's coder behind one interface
// (AnyCoder), which the exchange and the Compression handle use.
//
// A codec is a class with its name, the bytes it needs for n elements, and a coder: a class
// template over the scalar type, made once per run from the block size, that holds whatever the
// codec reuses between calls (ensmallen's update-policy shape: the settings make the per-run
// state). Encoding rounds to nearest, so that it is a pure function of its input: every worker
// that decodes the same bytes gets the same values, bit for bit.
//
//     struct MyCodec {
//       static constexpr const char* name = "mine";
//       static std::size_t encoded_bytes(std::size_t n, std::size_t block);
//       template <class T> class Coder {
//        public:
//         explicit Coder(std::size_t block);
//         void encode(std::span<T> x, std::span<std::byte> out);      // x <- x - D(Q(x))
//         void decode(std::span<const std::byte> in, std::span<T> out, bool accumulate);
//       };
//     };
//     cocod::Compress c{.format = cocod::Compression::of<MyCodec>()};
#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

namespace cocod::compress {

/// A coder of scalar type T (a codec's per-run state): made from the block size; encode(x, out)
/// writes x's encoding into out (encoded_bytes(x.size(), block) bytes) and leaves in x what the
/// rounding lost, x - D(Q(x)), the error feedback's residual; decode(in, out, accumulate) writes
/// D(in) into out, or adds it with `accumulate`.
template <class K, class T>
concept CoderOf = std::constructible_from<K, std::size_t> &&
                  requires(K k, std::span<T> x, std::span<std::byte> out, std::span<const std::byte> in, bool accumulate) {
                    k.encode(x, out);
                    k.decode(in, x, accumulate);
                  };

/// A codec: its name (in messages and checkpoints), the bytes that encode n elements in blocks
/// of `block`, and its coder for float and double. It may also state error_bound(|x|, max |x| of
/// the block), the most an element can lose in one encoding.
template <class C>
concept Codec = requires(std::size_t n, std::size_t block) {
  { C::name } -> std::convertible_to<const char*>;
  { C::encoded_bytes(n, block) } -> std::same_as<std::size_t>;
} && CoderOf<typename C::template Coder<float>, float> && CoderOf<typename C::template Coder<double>, double>;

/// A codec's coder of scalar type T behind one interface. It checks the sizes the codec relies on.
template <class T>
class AnyCoder {
 public:
  virtual ~AnyCoder() = default;
  void encode(std::span<T> x, std::span<std::byte> out) {
    if (out.size() != encoded_bytes(x.size())) throw std::logic_error("cocod::compress::encode: bad output size");
    do_encode(x, out);
  }
  void decode(std::span<const std::byte> in, std::span<T> out, bool accumulate = false) {
    if (in.size() != encoded_bytes(out.size())) throw std::logic_error("cocod::compress::decode: bad input size");
    do_decode(in, out, accumulate);
  }
  [[nodiscard]] virtual std::size_t encoded_bytes(std::size_t n) const = 0;

 private:
  virtual void do_encode(std::span<T> x, std::span<std::byte> out) = 0;
  virtual void do_decode(std::span<const std::byte> in, std::span<T> out, bool accumulate) = 0;
};

namespace codec_detail {
template <Codec C, class T>
class Erased final : public AnyCoder<T> {
 public:
  explicit Erased(std::size_t block) : block_(block), coder_(block) {}
  [[nodiscard]] std::size_t encoded_bytes(std::size_t n) const override { return C::encoded_bytes(n, block_); }

 private:
  void do_encode(std::span<T> x, std::span<std::byte> out) override { coder_.encode(x, out); }
  void do_decode(std::span<const std::byte> in, std::span<T> out, bool accumulate) override { coder_.decode(in, out, accumulate); }
  std::size_t block_;
  typename C::template Coder<T> coder_;
};
}  // namespace codec_detail

/// A coder of codec C for scalar type T in blocks of `block` (>= 1).
template <Codec C, class T>
[[nodiscard]] std::unique_ptr<AnyCoder<T>> make_coder(std::size_t block) {
  if (block == 0) throw std::logic_error(std::string("cocod::compress: codec ") + C::name + " needs a block of >= 1 elements");
  return std::make_unique<codec_detail::Erased<C, T>>(block);
}

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

// ---- what the block codecs share ------------------------------------------------------------

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
inline void put_scale(std::byte* out, std::size_t b, float s) noexcept { std::memcpy(out + 4 * b, &s, 4); }
inline float get_scale(const std::byte* in, std::size_t b) noexcept {
  float s;
  std::memcpy(&s, in + 4 * b, 4);
  return s;
}
inline std::size_t blocks(std::size_t n, std::size_t block) noexcept { return block == 0 ? 0 : (n + block - 1) / block; }

}  // namespace codec_detail

}  // namespace cocod::compress
