#pragma once
// The primitives of the CPU backend, the same set as backend/cuda/kernels.hpp: an index loop that
// runs an element functor, and the passes a backend does its own way (copy, fill, the finiteness
// check, the control slots' transfers). Every algorithm's pass is written once, as a functor run
// by for_each_index (beside the algorithm that uses it), so the CPU and the device evaluate the
// same formula in the same order: special cases (one worker, no momentum) are exact to the bit.
#include <Eigen/Core>

#include <algorithm>
#include <cstddef>
#include <span>
#include <type_traits>

#include "cocod/backend/tags.hpp"

namespace cocod::backend {

/// f(i) for i in [0, n), in order. The functor holds raw pointers into the buffers it walks;
/// the loop is one pass over memory, and the compiler vectorizes it.
template <class F>
void for_each_index(cpu, std::size_t n, F f) {
  for (std::size_t i = 0; i < n; ++i) f(i);
}

/// dst = src.
template <class T>
void copy(cpu, std::span<T> dst, std::type_identity_t<std::span<const T>> src) {
  std::copy(src.begin(), src.end(), dst.begin());
}

/// x = 0 (a worker's contribution withheld from a reduction).
template <class T>
void zero(cpu, std::span<T> x) {
  std::fill(x.begin(), x.end(), T(0));
}

/// True when every element is finite (no NaN, no infinity): one read of the buffer. x * 0 is 0
/// for a finite x and NaN otherwise, so the sum is NaN exactly when some element is not finite;
/// unlike a test per element, the sum vectorizes and runs at memory speed (the kernels benchmark).
template <class T>
[[nodiscard]] bool all_finite(cpu, std::span<T> x) {
  using V = std::remove_const_t<T>;
  using Vec = Eigen::Array<V, Eigen::Dynamic, 1>;
  return (Eigen::Map<const Vec>(x.data(), static_cast<Eigen::Index>(x.size())) * V(0)).sum() == V(0);
}

/// The sum of the squares of x, accumulated in T by Eigen's vectorized reduction (the same order
/// on every run of one build): the global norm's square for gradient clipping.
template <class T>
[[nodiscard]] std::remove_const_t<T> squared_norm(cpu, std::span<T> x) {
  using V = std::remove_const_t<T>;
  using Vec = Eigen::Matrix<V, Eigen::Dynamic, 1>;
  return Eigen::Map<const Vec>(x.data(), static_cast<Eigen::Index>(x.size())).squaredNorm();
}

/// Writes values into host memory at buffer[offset...] (the control slots of a reduced buffer).
template <class T>
void store(cpu, std::span<T> buffer, std::size_t offset, std::type_identity_t<std::span<const T>> values) {
  std::copy(values.begin(), values.end(), buffer.begin() + static_cast<std::ptrdiff_t>(offset));
}
/// Reads buffer[offset...] into values.
template <class T>
void load(cpu, std::type_identity_t<std::span<const T>> buffer, std::size_t offset, std::span<T> values) {
  std::copy_n(buffer.begin() + static_cast<std::ptrdiff_t>(offset), values.size(), values.begin());
}

}  // namespace cocod::backend
