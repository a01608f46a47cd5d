#pragma once
// The passes every part of a run uses, written once for every backend: each is an element
// functor run by the backend's for_each_index (found by argument-dependent lookup on the tag), so
// that the host and the device evaluate the same formula. A backend may still override a pass
// with a more specialized overload for its tag. The passes of one algorithm sit beside it.
#include <cstddef>

#include "cocod/backend/spans.hpp"
#include "cocod/backend/tags.hpp"

namespace cocod::backend {

namespace passes {
template <class T>
struct Scale {
  T* dst;
  const T* src;
  T w;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const { dst[i] = w * src[i]; }
};
template <class T>
struct Lerp {
  T* x;
  const T* z;
  T alpha;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const { x[i] = (T(1) - alpha) * z[i] + alpha * x[i]; }
};
}  // namespace passes

/// dst = w * src (the send buffer of a weighted all-reduce).
template <class B, class S>
void scale(B b, S dst, read_only_t<S> src, element_t<S> w) {
  for_each_index(b, dst.size(), passes::Scale<element_t<S>>{dst.data(), src.data(), w});
}

/// x = (1 - alpha) * z + alpha * x.
template <class B, class S>
void lerp(B b, S x, read_only_t<S> z, element_t<S> alpha) {
  for_each_index(b, x.size(), passes::Lerp<element_t<S>>{x.data(), z.data(), alpha});
}

}  // namespace cocod::backend
