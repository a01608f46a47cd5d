#pragma once
// A view of device memory: a pointer and a size that host code carries but never dereferences.
// It is the span type of the device backend (backend::cuda), so that a communicator or kernel
// can tell device buffers from host buffers at compile time.
#include <cstddef>
#include <type_traits>

namespace cocod::backend {

/// Contiguous elements in the memory of Thrust's device system (a GPU with CUDA; host memory
/// under the OMP or CPP device systems).
template <class T>
class device_span {
 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;

  constexpr device_span() noexcept = default;
  constexpr device_span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  /// device_span<const T> from device_span<T>.
  template <class U>
    requires std::is_convertible_v<U (*)[], T (*)[]>
  constexpr device_span(const device_span<U>& other) noexcept : data_(other.data()), size_(other.size()) {}

  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  [[nodiscard]] constexpr std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] constexpr device_span first(std::size_t n) const noexcept { return {data_, n}; }
  [[nodiscard]] constexpr device_span last(std::size_t n) const noexcept { return {data_ + size_ - n, n}; }
  [[nodiscard]] constexpr device_span subspan(std::size_t offset, std::size_t n) const noexcept {
    return {data_ + offset, n};
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace cocod::backend

namespace cocod {
/// The short spelling, as in model types: `std::span<float> parameters()` on the host,
/// `cocod::device_span<float> parameters()` on a device.
using backend::device_span;
}  // namespace cocod
