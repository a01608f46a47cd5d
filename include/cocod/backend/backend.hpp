#pragma once
// The one place that picks a backend from where a model's parameters live. Every backend
// folder (backend/cpu/, later backend/cuda/) provides the same files: buffer.hpp (the owning
// buffer for anchors, send buffers and momentum) and kernels.hpp (the fused passes).
#include <type_traits>

#include "cocod/backend/tags.hpp"
#include "cocod/model/concepts.hpp"

namespace cocod::backend {

/// The backend for a parameter buffer P. Host buffers map to backend::cpu; a device backend
/// specialises this trait for its device spans and vectors.
template <class P>
struct backend_of {
  using type = cpu;
};

template <class P>
using backend_of_t = typename backend_of<std::remove_cvref_t<P>>::type;

/// The backend of a model, from the type its parameters() returns.
template <class M>
using backend_of_model_t = backend_of_t<decltype(std::declval<M&>().parameters())>;

}  // namespace cocod::backend

#include "cocod/backend/cpu/buffer.hpp"
#include "cocod/backend/cpu/kernels.hpp"
