#pragma once
// The device backend: parameters in thrust::device_vector<T> or cocod::backend::device_span<T>
// select it at compile time. <cocod.hpp> includes it in CUDA translation units (nvcc) and
// wherever COCOD_DEVICE_BACKEND is defined (the cocod::cuda target defines it); elsewhere
// include it before or after <cocod.hpp>. To run the same code on the host, compile with
// -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP -fopenmp and CCCL's headers.
#define COCOD_INTERNAL_INCLUDE
#include "cocod/backend/cuda/buffer.hpp"
#include "cocod/backend/cuda/kernels.hpp"
#undef COCOD_INTERNAL_INCLUDE
