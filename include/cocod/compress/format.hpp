#pragma once
// Compression: the name of a codec of the compressed exchange, a small value a setting holds
// (Compress::format) that makes the codec's coders; the built-in codecs; and the functions that
// encode, decode and size through one.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "cocod/compress/bf16.hpp"
#include "cocod/compress/codec.hpp"
#include "cocod/compress/fp16.hpp"
#include "cocod/compress/int8.hpp"

namespace cocod {

namespace compress {
/// What a Compression holds of its codec: the codec's static parts, behind function pointers.
struct Descriptor {
  const char* name;
  std::size_t (*encoded_bytes)(std::size_t n, std::size_t block);
  std::unique_ptr<AnyCoder<float>> (*coder_float)(std::size_t block);
  std::unique_ptr<AnyCoder<double>> (*coder_double)(std::size_t block);
  double (*error_bound)(double x_abs, double block_max);  // (a codec that states none: infinity)
};
template <Codec C>
inline constexpr Descriptor descriptor_of{
    C::name, &C::encoded_bytes, &make_coder<C, float>, &make_coder<C, double>, [] {
      if constexpr (requires(double v) { { C::error_bound(v, v) } -> std::convertible_to<double>; })
        return +[](double x, double m) -> double { return C::error_bound(x, m); };
      else
        return +[](double, double) { return std::numeric_limits<double>::infinity(); };
    }()};
}  // namespace compress

/// How a model-averaging algorithm encodes what it sends (Compress::format): a codec, or none.
/// Every codec sends each worker's weighted deviation from the outer model, with error feedback.
/// The built-in ones:
///  - none: the full model in the scalar type, summed by one all-reduce (the default);
///  - bf16: 2 bytes per element, the top half of an fp32, rounded to nearest even;
///  - fp16: 2 bytes per element, in blocks of Compress::block elements that share one
///    fp32 scale (a power of two), so that deviations never leave fp16's range;
///  - int8: 1 byte per element, symmetric, one fp32 scale per block (max |x| / 127).
/// A codec of one's own (a class that models compress::Codec) is `Compression::of<MyCodec>()`.
class Compression {
 public:
  /// none.
  constexpr Compression() noexcept = default;
  /// The codec C.
  template <class C>
  [[nodiscard]] static constexpr Compression of() noexcept {
    if constexpr (compress::Codec<C>) {
      return Compression(&compress::descriptor_of<C>);
    } else {
      static_assert(compress::Codec<C>,
                    "cocod::Compression::of<C>(): C must model cocod::compress::Codec: `static constexpr const char* name`, "
                    "`static std::size_t encoded_bytes(std::size_t n, std::size_t block)` and `template <class T> class Coder` "
                    "(constructed from the block size) with `encode(std::span<T>, std::span<std::byte>)` and "
                    "`decode(std::span<const std::byte>, std::span<T>, bool accumulate)`, for float and double");
      return Compression{};
    }
  }
  static const Compression none, bf16, fp16, int8;

  /// "none", or the codec's name.
  [[nodiscard]] constexpr const char* name() const noexcept { return codec_ ? codec_->name : "none"; }
  /// A codec, not none.
  [[nodiscard]] constexpr bool active() const noexcept { return codec_ != nullptr; }
  /// Bytes that encode n elements in blocks of `block`; with none, n values of `scalar_bytes`.
  [[nodiscard]] std::size_t encoded_bytes(std::size_t n, std::size_t block, std::size_t scalar_bytes) const {
    return codec_ ? codec_->encoded_bytes(n, block) : scalar_bytes * n;
  }
  /// The codec's coder of scalar type T (float or double) in blocks of `block`, made once per
  /// run; std::logic_error for none or a block of 0.
  template <class T>
  [[nodiscard]] std::unique_ptr<compress::AnyCoder<T>> coder(std::size_t block) const {
    if (!codec_) throw std::logic_error("cocod::compress: Compression::none has no coder (it sends the model itself)");
    if constexpr (std::is_same_v<T, float>) return codec_->coder_float(block);
    else if constexpr (std::is_same_v<T, double>) return codec_->coder_double(block);
    else throw std::logic_error(std::string("cocod::compress: codec ") + codec_->name + " codes float and double only");
  }
  /// The most a block's element can lose in one encoding: |x - D(Q(x))| <= error_bound(|x|,
  /// max |x| of its block); 0 for none, infinity for a codec that states no bound.
  [[nodiscard]] double error_bound(double x_abs, double block_max) const {
    return codec_ ? codec_->error_bound(x_abs, block_max) : 0.0;
  }
  friend constexpr bool operator==(Compression, Compression) noexcept = default;

 private:
  constexpr explicit Compression(const compress::Descriptor* codec) noexcept : codec_(codec) {}
  const compress::Descriptor* codec_ = nullptr;
};
inline constexpr Compression Compression::none{};
inline constexpr Compression Compression::bf16 = Compression::of<compress::Bf16>();
inline constexpr Compression Compression::fp16 = Compression::of<compress::Fp16>();
inline constexpr Compression Compression::int8 = Compression::of<compress::Int8>();

namespace compress {

/// The codecs a name selects (the programs' --compress, a checkpoint's settings).
inline constexpr Compression builtin[] = {Compression::none, Compression::bf16, Compression::fp16, Compression::int8};

/// "none", or the codec's name.
[[nodiscard]] constexpr const char* name(Compression c) noexcept { return c.name(); }

/// A codec as a checkpoint's settings hold it: a built-in codec's place in `builtin` (none 0,
/// bf16 1, fp16 2, int8 3), any other codec a 31-bit hash of its name above those.
enum class Id : std::int32_t {};
[[nodiscard]] constexpr Id id_of(Compression c) noexcept {
  for (std::size_t i = 0; i < std::size(builtin); ++i)
    if (builtin[i] == c) return Id(static_cast<std::int32_t>(i));
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (const char* p = c.name(); *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 16777619u;
  return Id(static_cast<std::int32_t>(std::size(builtin) + h % (0x7FFFFFFFu - std::size(builtin))));
}
/// The name of the codec an id stands for, as a message shows it.
[[nodiscard]] inline std::string to_string(Id id) {
  const auto i = static_cast<std::int32_t>(id);
  if (i >= 0 && static_cast<std::size_t>(i) < std::size(builtin)) return builtin[i].name();
  return "a codec of its own (id " + std::to_string(i) + ")";
}
/// The built-in codec named `s` ("none", "bf16", "fp16", "int8"); std::invalid_argument otherwise.
[[nodiscard]] inline Compression parse(std::string_view s) {
  std::string names;
  for (const Compression c : builtin) {
    if (s == c.name()) return c;
    names += (names.empty() ? "" : ", ") + std::string(c.name());
  }
  throw std::invalid_argument("cocod: unknown compression '" + std::string(s) + "' (" + names + ")");
}

/// Bytes that encode n elements in blocks of `block` (the block scales included). `scalar_bytes`
/// is the size of the scalar type, for Compression::none.
[[nodiscard]] inline std::size_t encoded_bytes(Compression c, std::size_t n, std::size_t block, std::size_t scalar_bytes) {
  return c.encoded_bytes(n, block, scalar_bytes);
}

/// Encodes x (n elements, blocks of `block`) into out (encoded_bytes(c, n, block) bytes) and
/// leaves in x what the rounding lost, x - D(Q(x)): the error feedback's residual. Not for
/// Compression::none. (One call makes one coder; an exchange makes its coders once.)
template <class T>
void encode(Compression c, std::span<T> x, std::size_t block, std::span<std::byte> out) {
  c.coder<T>(block)->encode(x, out);
}
/// out = D(in), the n = out.size() values that `in` encodes; with `accumulate`, out += D(in).
template <class T>
void decode(Compression c, std::span<const std::byte> in, std::size_t block, std::span<T> out, bool accumulate = false) {
  c.coder<T>(block)->decode(in, out, accumulate);
}
/// The most a block's element can lose in one encoding (Compression::error_bound).
[[nodiscard]] inline double error_bound(Compression c, double x_abs, double block_max) { return c.error_bound(x_abs, block_max); }

}  // namespace compress
}  // namespace cocod
