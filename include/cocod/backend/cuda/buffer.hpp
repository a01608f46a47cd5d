#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/backend/cuda/buffer.hpp is internal: include <cocod/backend/cuda.hpp>"
#endif
// Device memory of the cuda backend: how cocod sees device parameters, the owning buffer, and
// the copies between device and host that host-staged communicators use (found by
// argument-dependent lookup on device_span, like the kernels on the backend tag).
#include <thrust/copy.h>
#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>

#include <cstddef>
#include <new>
#include <stdexcept>
#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

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

namespace backend {

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

/// Copies host memory to device memory, queued on the compute (legacy default) stream: kernels
/// queued after it see the data, and the host does not wait (on a GPU; a plain copy elsewhere).
/// `from` must stay untouched until the stream has passed the copy: staging slots are pinned
/// memory whose next use starts with a copy queued behind this one.
template <class T>
void copy_from_host_async(const T* from, device_span<T> to) {
#if defined(__CUDACC__)
  if (cudaMemcpyAsync(to.data(), from, to.size_bytes(), cudaMemcpyHostToDevice, cudaStreamLegacy) != cudaSuccess)
    throw std::runtime_error("cocod: cudaMemcpyAsync to the device failed");
#else
  copy_from_host(from, to);
#endif
}

/// Host memory for staging device buffers: page-locked (pinned) on a GPU, so that copies run at
/// full speed and asynchronously; ordinary memory under Thrust's host device systems.
template <class T>
void* host_staging_allocate(device_span<T>, std::size_t bytes) {
#if defined(__CUDACC__)
  void* p = nullptr;
  if (cudaMallocHost(&p, bytes) != cudaSuccess) throw std::bad_alloc();
  return p;
#else
  return ::operator new(bytes);
#endif
}
template <class T>
void host_staging_free(device_span<T>, void* p) noexcept {
#if defined(__CUDACC__)
  cudaFreeHost(p);
#else
  ::operator delete(p);
#endif
}

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
