#pragma once
// How a worker merges an average that lands into its model (docs/algorithm.md, the merge rules
// side by side): CoCoD's add-back keeps the progress made since the snapshot; the lerp of
// Streaming DiLoCo blends the new outer model with the local one. Local-SGD replaces the model
// (a copy) and Overlap-Local-SGD pulls it back (its own fused pass).
#include <cstddef>

#include "cocod/backend/backend.hpp"
#include "cocod/family/fragments.hpp"

namespace cocod {
namespace backend {
namespace passes {
template <class T>
struct AddBack {
  T* x;
  const T* anchor;
  const T* z;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const { x[i] += z[i] - anchor[i]; }
};
}  // namespace passes

/// CoCoD's add-back: x = x + (z - anchor), the local progress since the snapshot kept.
template <class B, class S>
void add_back(B b, S x, read_only_t<S> anchor, read_only_t<S> z) {
  for_each_index(b, x.size(), passes::AddBack<element_t<S>>{x.data(), anchor.data(), z.data()});
}
}  // namespace backend

namespace detail {

/// The merge of a landed piece into the model's piece x (snapshot `anchor`, new outer model z):
/// add-back x += z - anchor, or lerp x = (1 - alpha) z + alpha x.
template <class B, class S>
void merge(B b, const Fragments& f, S x, backend::read_only_t<S> anchor, backend::read_only_t<S> z) {
  if (f.merge == FragmentMerge::lerp)
    lerp(b, x, z, static_cast<backend::element_t<S>>(f.alpha));
  else
    add_back(b, x, anchor, z);
}

}  // namespace detail
}  // namespace cocod
