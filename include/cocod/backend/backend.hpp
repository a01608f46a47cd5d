#pragma once
// The backends: a tag per backend, and per backend folder the same files: buffer.hpp (the
// owning buffer for anchors, send buffers and momentum, and its span type) and kernels.hpp (the
// fused passes). Which backend a model uses is decided in one place, cocod::parameter_traits
// (model/concepts.hpp), from the type its parameters() returns.
#include <type_traits>

#include "cocod/backend/tags.hpp"
#include "cocod/model/concepts.hpp"

namespace cocod::backend {

/// The backend of a parameter buffer type P (backend::cpu or backend::cuda).
template <class P>
using backend_of_t = typename parameter_traits<std::remove_cvref_t<P>>::backend;

}  // namespace cocod::backend

#include "cocod/backend/cpu/buffer.hpp"
#include "cocod/backend/cpu/kernels.hpp"

// The device backend joins when the translation unit is CUDA, or when the build asks for it
// (COCOD_DEVICE_BACKEND: set by the cocod::cuda target, and by the OMP device-system tests).
#if defined(__CUDACC__) || defined(COCOD_DEVICE_BACKEND)
#include "cocod/backend/cuda.hpp"
#endif
