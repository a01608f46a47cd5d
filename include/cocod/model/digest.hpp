#pragma once
// A short fingerprint of a model's parameters, to compare runs bit for bit from the shell: two
// runs print the same digest exactly when their parameters have the same bits (up to the
// collisions of a 64-bit hash).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cocod/backend/device_span.hpp"
#include "cocod/model/concepts.hpp"

namespace cocod {

/// FNV-1a (64 bits) of the bytes of `x`, as 16 hexadecimal digits.
template <class T>
[[nodiscard]] std::string digest(std::span<const T> x) {
  static_assert(std::is_arithmetic_v<T>);
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const auto* b = reinterpret_cast<const unsigned char*>(x.data());
  for (std::size_t i = 0; i < x.size_bytes(); ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}
/// The digest of device memory (copied to the host first; needs <cocod/backend/cuda.hpp>).
template <class T>
[[nodiscard]] std::string digest(backend::device_span<const T> x) {
  std::vector<std::remove_const_t<T>> host(x.size());
  if (!host.empty()) copy_to_host(x, host.data());
  return digest(std::span<const std::remove_const_t<T>>(host));
}
/// The digest of a model's parameters.
template <class M>
  requires requires(M& m) { as_span(m.parameters()); }
[[nodiscard]] std::string model_digest(M& model) {
  auto x = as_span(model.parameters());
  using S = decltype(x);
  if constexpr (std::is_same_v<S, std::span<typename S::element_type>>)
    return digest(std::span<const typename S::element_type>(x));
  else
    return digest(backend::device_span<const typename S::element_type>(x));
}

}  // namespace cocod
