#pragma once
// The encodings of a compressed exchange, and what each costs on the wire.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cocod {

/// How a model-averaging algorithm encodes what it sends (Compress::format). Every format but
/// `none` sends each worker's weighted deviation from the outer model, with error feedback:
///  - none: the full model in the scalar type, summed by one all-reduce (the default);
///  - bf16: 2 bytes per element, the top half of an fp32, rounded to nearest even;
///  - fp16: 2 bytes per element, in blocks of Compress::block elements that share one
///    fp32 scale (a power of two), so that deviations never leave fp16's range;
///  - int8: 1 byte per element, symmetric, one fp32 scale per block (max |x| / 127).
enum class Compression { none, bf16, fp16, int8 };

namespace compress {

/// "none", "bf16", "fp16", "int8".
[[nodiscard]] inline const char* name(Compression c) noexcept {
  switch (c) {
    case Compression::bf16: return "bf16";
    case Compression::fp16: return "fp16";
    case Compression::int8: return "int8";
    default: return "none";
  }
}
/// The format named `s` ("none", "bf16", "fp16", "int8"); std::invalid_argument otherwise.
[[nodiscard]] inline Compression parse(std::string_view s) {
  for (Compression c : {Compression::none, Compression::bf16, Compression::fp16, Compression::int8})
    if (s == name(c)) return c;
  throw std::invalid_argument("cocod: unknown compression '" + std::string(s) + "' (none, bf16, fp16, int8)");
}

/// Bytes that encode n elements in blocks of `block` (the block scales included). `scalar_bytes`
/// is the size of the scalar type, for Compression::none.
[[nodiscard]] inline std::size_t encoded_bytes(Compression c, std::size_t n, std::size_t block,
                                               std::size_t scalar_bytes) noexcept {
  const std::size_t blocks = block == 0 ? 0 : (n + block - 1) / block;
  switch (c) {
    case Compression::bf16: return 2 * n;
    case Compression::fp16: return 4 * blocks + 2 * n;
    case Compression::int8: return 4 * blocks + n;
    default: return scalar_bytes * n;
  }
}

}  // namespace compress
}  // namespace cocod
