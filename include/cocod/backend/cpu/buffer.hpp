#pragma once
// Owning buffers of the CPU backend: anchors, send buffers, gradients and momentum.
#include <cstddef>
#include <span>

#include "cocod/backend/tags.hpp"
#include <vector>

namespace cocod::backend {

/// A buffer of n scalars of backend B, allocated once per run.
template <class B, class T>
struct buffer;

template <class T>
struct buffer<cpu, T> {
  using span_type = std::span<T>;
  std::vector<T> storage;

  void resize(std::size_t n) { storage.assign(n, T(0)); }
  [[nodiscard]] std::size_t size() const noexcept { return storage.size(); }
  [[nodiscard]] std::span<T> span() noexcept { return storage; }
  [[nodiscard]] std::span<const T> span() const noexcept { return storage; }
  /// The first n elements (the model part of a buffer that also carries control slots).
  [[nodiscard]] std::span<T> first(std::size_t n) noexcept { return span().first(n); }
};

}  // namespace cocod::backend
