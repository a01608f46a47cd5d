#pragma once
// The span types of the backends (std::span<T> on the host, device_span<T> on a device) seen
// generically: their element type and their read-only form, so that a pass is written once.
#include <span>
#include <type_traits>

#include "cocod/backend/device_span.hpp"

namespace cocod::backend {

template <class S>
struct span_traits;
template <class T>
struct span_traits<std::span<T>> {
  using element = std::remove_const_t<T>;
  using read_only = std::span<const element>;
};
template <class T>
struct span_traits<device_span<T>> {
  using element = std::remove_const_t<T>;
  using read_only = device_span<const element>;
};

/// The scalar of span type S: float for std::span<float> and device_span<const float> alike.
template <class S>
using element_t = typename span_traits<S>::element;
/// The read-only span of S's memory, a non-deduced parameter type: S converts to it.
template <class S>
using read_only_t = std::type_identity_t<typename span_traits<S>::read_only>;

}  // namespace cocod::backend
