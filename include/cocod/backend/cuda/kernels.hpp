#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/backend/cuda/kernels.hpp is internal: include <cocod/backend/cuda.hpp>"
#endif
// The primitives of the cuda backend, the same set as backend/cpu/kernels.hpp. for_each_index
// is one thrust::for_each_n over the element index: one kernel launch on a GPU (one parallel
// loop under Thrust's OMP device system) in which every buffer is read and written once. The
// algorithms' element functors are the CPU's, so both evaluate the same formulas.
#include <thrust/copy.h>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/functional.h>
#include <thrust/logical.h>
#include <thrust/transform_reduce.h>

#include <cstddef>
#include <span>
#include <type_traits>

#include "cocod/backend/device_span.hpp"
#include "cocod/backend/tags.hpp"

namespace cocod::backend {

namespace cuda_kernels {
template <class T>
using const_span = std::type_identity_t<device_span<const T>>;  // converts from device_span<T>

template <class T>
struct Finite {
  // x - x is 0 for finite x and NaN for NaN and infinities; no <cmath> needed on the device.
  COCOD_HOST_DEVICE bool operator()(T v) const { return v - v == T(0); }
};
template <class T>
struct Square {
  COCOD_HOST_DEVICE T operator()(T v) const { return v * v; }
};
}  // namespace cuda_kernels

/// f(i) for i in [0, n), as one kernel (the order of the elements is the device's).
template <class F>
void for_each_index(cuda, std::size_t n, F f) {
  if (n > 0) thrust::for_each_n(thrust::device, thrust::counting_iterator<std::size_t>(0), n, f);
}

/// dst = src.
template <class T>
void copy(cuda, device_span<T> dst, cuda_kernels::const_span<T> src) {
  thrust::copy_n(thrust::device, thrust::device_pointer_cast(src.data()), src.size(),
                 thrust::device_pointer_cast(dst.data()));
}

/// True when every element is finite (no NaN, no infinity): one reduction over the buffer.
template <class T>
[[nodiscard]] bool all_finite(cuda, device_span<T> x) {
  using V = std::remove_const_t<T>;
  return thrust::all_of(thrust::device, thrust::device_pointer_cast(x.data()),
                        thrust::device_pointer_cast(x.data() + x.size()), cuda_kernels::Finite<V>{});
}
/// The sum of the squares of x, accumulated in T (the device's order of the partial sums).
template <class T>
[[nodiscard]] std::remove_const_t<T> squared_norm(cuda, device_span<T> x) {
  using V = std::remove_const_t<T>;
  return thrust::transform_reduce(thrust::device, thrust::device_pointer_cast(x.data()),
                                  thrust::device_pointer_cast(x.data() + x.size()), cuda_kernels::Square<V>{}, V(0),
                                  thrust::plus<V>{});
}
/// x = 0.
template <class T>
void zero(cuda, device_span<T> x) {
  thrust::fill_n(thrust::device, thrust::device_pointer_cast(x.data()), x.size(), T(0));
}

/// Writes host values into device memory at buffer[offset...].
template <class T>
void store(cuda, device_span<T> buffer, std::size_t offset, std::type_identity_t<std::span<const T>> values) {
  thrust::copy_n(values.data(), values.size(), thrust::device_pointer_cast(buffer.data() + offset));
}
/// Reads buffer[offset...] from device memory.
template <class T>
void load(cuda, std::type_identity_t<cuda_kernels::const_span<T>> buffer, std::size_t offset, std::span<T> values) {
  thrust::copy_n(thrust::device_pointer_cast(buffer.data() + offset), values.size(), values.data());
}

}  // namespace cocod::backend
