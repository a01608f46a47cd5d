#pragma once
// The backends: a tag per backend (backend/tags.hpp), and per backend folder the same files:
// buffer.hpp (the owning buffer for anchors, send buffers and momentum, and its span type) and
// kernels.hpp (the primitives: for_each_index, copy, zero, all_finite, squared_norm, store, load). Which
// backend a model uses is decided in one place, cocod::parameter_traits (model/concepts.hpp),
// from the type its parameters() returns. Passes are written once, as element functors run by
// for_each_index (backend/passes.hpp, and beside the algorithm that uses each).
//
// One dispatch rule: a kernel is a free function in cocod::backend whose first parameter is the
// backend's tag, and cocod calls it unqualified, `scale(B{}, dst, src, w)`. Argument-dependent
// lookup on the tag finds it where the call is instantiated, so the device backend's header may
// be included before or after this one.
#include "cocod/backend/tags.hpp"
#include "cocod/backend/cpu/buffer.hpp"
#include "cocod/backend/cpu/kernels.hpp"
#include "cocod/backend/passes.hpp"

// The device backend joins when the translation unit is CUDA, or when the build asks for it
// (COCOD_DEVICE_BACKEND: set by the cocod::cuda target, and by the OMP device-system tests).
// Elsewhere include <cocod/backend/cuda.hpp> yourself, before or after <cocod.hpp>.
#if defined(__CUDACC__) || defined(COCOD_DEVICE_BACKEND)
#include "cocod/backend/cuda.hpp"
#endif
