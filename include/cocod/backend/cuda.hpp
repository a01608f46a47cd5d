#pragma once
// The device backend: parameters in thrust::device_vector<T> or cocod::device_span<T> select it
// at compile time. <cocod.hpp> includes it in CUDA translation units (nvcc) and wherever
// COCOD_DEVICE_BACKEND is defined (the cocod::cuda target defines it); to run the same code on
// the host, compile with -DCOCOD_DEVICE_BACKEND -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP
// -fopenmp and CCCL's headers. The algorithms find its kernels by qualified name, so it must come
// before them: include it first, or let <cocod.hpp> include it.
#if defined(COCOD_TRAINER_INCLUDED) && !defined(COCOD_CUDA_BACKEND_INCLUDED)
#error "include <cocod/backend/cuda.hpp> before <cocod.hpp> (or define COCOD_DEVICE_BACKEND for the whole build)"
#endif
#define COCOD_CUDA_BACKEND_INCLUDED
#define COCOD_INTERNAL_INCLUDE
#include "cocod/backend/cuda/buffer.hpp"
#include "cocod/backend/cuda/kernels.hpp"
#undef COCOD_INTERNAL_INCLUDE
