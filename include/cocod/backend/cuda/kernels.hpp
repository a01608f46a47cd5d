#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/backend/cuda/kernels.hpp is internal: include <cocod/backend/cuda.hpp>"
#endif
// The fused passes of the cuda backend, the same set as backend/cpu/kernels.hpp. Each is one
// thrust::for_each_n over the element index: every buffer is read and written once, in one
// kernel launch on a GPU (and one parallel loop under Thrust's OMP device system). The update
// formulas are written exactly as on the CPU.
#include <thrust/copy.h>
#include <thrust/fill.h>
#include <thrust/logical.h>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include <cstddef>
#include <span>
#include <type_traits>

#include "cocod/backend/device_span.hpp"
#include "cocod/backend/tags.hpp"

#if defined(__CUDACC__)
#define COCOD_HOST_DEVICE __host__ __device__
#else
#define COCOD_HOST_DEVICE
#endif

namespace cocod::backend {

namespace cuda_kernels {
template <class T>
using const_span = std::type_identity_t<device_span<const T>>;  // converts from device_span<T>

template <class F>
void for_each_index(std::size_t n, F f) {
  thrust::for_each_n(thrust::device, thrust::counting_iterator<std::size_t>(0), n, f);
}

template <class T>
struct Scale {
  T* dst;
  const T* src;
  T w;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const { dst[i] = w * src[i]; }
};

// One local step; the Rule parameter picks the formula at compile time (no branch per element).
enum class Rule { sgd, sgd_wd, momentum, momentum_wd, nesterov, nesterov_wd };
template <class T, Rule R>
struct LocalUpdate {
  T* x;
  const T* g;
  T* v;
  T lr, mu, lambda;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    if constexpr (R == Rule::sgd) {
      x[i] -= lr * g[i];
    } else if constexpr (R == Rule::sgd_wd) {
      x[i] -= lr * (g[i] + lambda * x[i]);
    } else if constexpr (R == Rule::momentum) {
      v[i] = mu * v[i] + g[i];
      x[i] -= lr * v[i];
    } else if constexpr (R == Rule::momentum_wd) {
      v[i] = mu * v[i] + (g[i] + lambda * x[i]);
      x[i] -= lr * v[i];
    } else if constexpr (R == Rule::nesterov) {
      v[i] = mu * v[i] + g[i];
      x[i] -= lr * (g[i] + mu * v[i]);
    } else {
      const T d = g[i] + lambda * x[i];
      v[i] = mu * v[i] + d;
      x[i] -= lr * (d + mu * v[i]);
    }
  }
};

template <class T>
struct RoundEnd {
  T* x;
  T* anchor;
  T* send;
  T w;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    const T xi = x[i] + (send[i] - anchor[i]);
    x[i] = xi;
    anchor[i] = xi;
    send[i] = w * xi;
  }
};
template <class T>
struct OuterStep {
  T* z;
  const T* abar;
  T* b;
  T eta, beta;
  bool nesterov, first;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    if (beta == T(0)) {
      z[i] -= eta * (z[i] - abar[i]);
      return;
    }
    const T delta = z[i] - abar[i];
    b[i] = first ? delta : beta * b[i] + delta;
    z[i] -= eta * (nesterov ? delta + beta * b[i] : b[i]);
  }
};
template <class T>
struct AddBack {
  T* x;
  const T* anchor;
  const T* z;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const { x[i] += z[i] - anchor[i]; }
};
template <class T>
struct Snapshot {
  T* anchor;
  T* send;
  const T* x;
  T w;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    anchor[i] = x[i];
    send[i] = w * x[i];
  }
};
template <class T>
struct Lerp {
  T* x;
  const T* z;
  T alpha;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const { x[i] = (T(1) - alpha) * z[i] + alpha * x[i]; }
};
template <class T>
struct PullBack {
  T* x;
  const T* z;
  T* v;
  T* send;
  T alpha, mu, w;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    x[i] -= alpha * (x[i] - z[i]);
    v[i] = mu == T(0) ? z[i] - x[i] : mu * v[i] + (z[i] - x[i]);
    send[i] = w * (z[i] - v[i]);
  }
};
template <class T>
struct Finite {
  // x - x is 0 for finite x and NaN for NaN and infinities; no <cmath> needed on the device.
  COCOD_HOST_DEVICE bool operator()(T v) const { return v - v == T(0); }
};
}  // namespace cuda_kernels

/// dst = w * src.
template <class T>
void scale(cuda, device_span<T> dst, cuda_kernels::const_span<T> src, T w) {
  cuda_kernels::for_each_index(dst.size(), cuda_kernels::Scale<T>{dst.data(), src.data(), w});
}

/// dst = src.
template <class T>
void copy(cuda, device_span<T> dst, cuda_kernels::const_span<T> src) {
  thrust::copy_n(thrust::device, thrust::device_pointer_cast(src.data()), src.size(),
                 thrust::device_pointer_cast(dst.data()));
}

/// One local update step, the formulas of backend/cpu/kernels.hpp, fused in one pass.
template <class T>
void local_update(cuda, device_span<T> x, cuda_kernels::const_span<T> g, device_span<T> velocity, T lr, T mu,
                  T lambda, bool nesterov) {
  using cuda_kernels::LocalUpdate;
  using cuda_kernels::Rule;
  const std::size_t n = x.size();
  T* v = velocity.data();
  auto run = [&](auto rule) {
    cuda_kernels::for_each_index(n, LocalUpdate<T, decltype(rule)::value>{x.data(), g.data(), v, lr, mu, lambda});
  };
  if (mu == T(0))
    lambda == T(0) ? run(std::integral_constant<Rule, Rule::sgd>{}) : run(std::integral_constant<Rule, Rule::sgd_wd>{});
  else if (!nesterov)
    lambda == T(0) ? run(std::integral_constant<Rule, Rule::momentum>{})
                   : run(std::integral_constant<Rule, Rule::momentum_wd>{});
  else
    lambda == T(0) ? run(std::integral_constant<Rule, Rule::nesterov>{})
                   : run(std::integral_constant<Rule, Rule::nesterov_wd>{});
}

/// CoCoD-SGD's round end in one pass: x = x + (xbar - anchor); anchor = x; send = w * x.
template <class T>
void round_end(cuda, device_span<T> x, device_span<T> anchor, device_span<T> send, T w) {
  cuda_kernels::for_each_index(x.size(), cuda_kernels::RoundEnd<T>{x.data(), anchor.data(), send.data(), w});
}

/// The outer optimizer's step on Delta = z - abar, the formulas of backend/cpu/kernels.hpp.
template <class T>
void outer_step(cuda, device_span<T> z, cuda_kernels::const_span<T> abar, device_span<T> b, T eta, T beta, bool nesterov,
                bool first) {
  cuda_kernels::for_each_index(z.size(), cuda_kernels::OuterStep<T>{z.data(), abar.data(), b.data(), eta, beta, nesterov, first});
}
/// x = x + (z - anchor).
template <class T>
void add_back(cuda, device_span<T> x, cuda_kernels::const_span<T> anchor, cuda_kernels::const_span<T> z) {
  cuda_kernels::for_each_index(x.size(), cuda_kernels::AddBack<T>{x.data(), anchor.data(), z.data()});
}
/// anchor = x;  send = w * x.
template <class T>
void snapshot(cuda, device_span<T> anchor, device_span<T> send, cuda_kernels::const_span<T> x, T w) {
  cuda_kernels::for_each_index(x.size(), cuda_kernels::Snapshot<T>{anchor.data(), send.data(), x.data(), w});
}
/// x = (1 - alpha) * z + alpha * x.
template <class T>
void lerp(cuda, device_span<T> x, cuda_kernels::const_span<T> z, T alpha) {
  cuda_kernels::for_each_index(x.size(), cuda_kernels::Lerp<T>{x.data(), z.data(), alpha});
}
/// Overlap-Local-SGD's round end: x -= alpha (x - z);  v = mu v + (z - x);  send = w (z - v).
template <class T>
void pull_back(cuda, device_span<T> x, cuda_kernels::const_span<T> z, device_span<T> v, device_span<T> send, T alpha, T mu,
               T w) {
  cuda_kernels::for_each_index(x.size(), cuda_kernels::PullBack<T>{x.data(), z.data(), v.data(), send.data(), alpha, mu, w});
}

/// True when every element is finite (no NaN, no infinity): one reduction over the buffer.
template <class T>
[[nodiscard]] bool all_finite(cuda, device_span<T> x) {
  using V = std::remove_const_t<T>;
  return thrust::all_of(thrust::device, thrust::device_pointer_cast(x.data()),
                        thrust::device_pointer_cast(x.data() + x.size()), cuda_kernels::Finite<V>{});
}
/// x = 0.
template <class T>
void zero(cuda, device_span<T> x) {
  thrust::fill_n(thrust::device, thrust::device_pointer_cast(x.data()), x.size(), T(0));
}

/// Writes host values into device memory at buffer[offset...].
template <class T>
void store(cuda, device_span<T> buffer, std::size_t offset, std::type_identity_t<std::span<const T>> values) {
  thrust::copy_n(values.data(), values.size(), thrust::device_pointer_cast(buffer.data() + offset));
}
/// Reads buffer[offset...] from device memory.
template <class T>
void load(cuda, std::type_identity_t<cuda_kernels::const_span<T>> buffer, std::size_t offset, std::span<T> values) {
  thrust::copy_n(thrust::device_pointer_cast(buffer.data() + offset), values.size(), values.data());
}

}  // namespace cocod::backend
