#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/backend/cuda/buffer.hpp is internal: include <cocod/backend/cuda.hpp>"
#endif
// Device memory of the cuda backend: how cocod sees device parameters, the owning buffer, and
// the copies between device and host that host-staged communicators use.
#include <thrust/copy.h>
#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>

#include <cstddef>

#include "cocod/backend/device_span.hpp"
#include "cocod/backend/tags.hpp"
#include "cocod/model/concepts.hpp"

namespace cocod {

/// Parameters in a thrust::device_vector select the device backend.
template <class T, class Alloc>
struct parameter_traits<thrust::device_vector<T, Alloc>> {
  using scalar = T;
  using backend = backend::cuda;
  static device_span<T> view(thrust::device_vector<T, Alloc>& p) noexcept {
    return {thrust::raw_pointer_cast(p.data()), p.size()};
  }
};

/// ... and so do parameters handed out as a device_span.
template <class T>
struct parameter_traits<device_span<T>> {
  using scalar = T;
  using backend = backend::cuda;
  static device_span<T> view(device_span<T>& p) noexcept { return p; }
};

/// Copies device memory to host memory (blocking).
template <class T>
void copy_to_host(device_span<const T> from, T* to) {
  thrust::copy_n(thrust::device_pointer_cast(from.data()), from.size(), to);
}
/// Copies host memory to device memory (blocking).
template <class T>
void copy_from_host(const T* from, device_span<T> to) {
  thrust::copy_n(from, to.size(), thrust::device_pointer_cast(to.data()));
}

namespace backend {

template <class B, class T>
struct buffer;

template <class T>
struct buffer<cuda, T> {
  using span_type = device_span<T>;
  thrust::device_vector<T> storage;

  void resize(std::size_t n) { storage.assign(n, T(0)); }
  [[nodiscard]] std::size_t size() const noexcept { return storage.size(); }
  [[nodiscard]] device_span<T> span() noexcept { return {thrust::raw_pointer_cast(storage.data()), storage.size()}; }
  [[nodiscard]] device_span<T> first(std::size_t n) noexcept { return span().first(n); }
};

}  // namespace backend
}  // namespace cocod
