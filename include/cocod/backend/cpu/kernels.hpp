#pragma once
// The fused memory passes of the CPU backend. Single-output passes are Eigen expressions;
// passes that write several buffers walk them in cache-sized blocks, so each element is read
// from memory once. Every expression keeps the operation order of the update rule as written
// in the docs, so that special cases (one worker, no momentum) are exact to the bit.
#include <Eigen/Core>

#include <algorithm>
#include <cstddef>
#include <span>
#include <type_traits>

#include "cocod/backend/tags.hpp"

namespace cocod::backend {

namespace cpu_kernels {
template <class T>
using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
auto map(std::span<T> s) {
  return Eigen::Map<Vec<T>>(s.data(), static_cast<Eigen::Index>(s.size()));
}
template <class T>
auto map(std::span<const T> s) {
  return Eigen::Map<const Vec<T>>(s.data(), static_cast<Eigen::Index>(s.size()));
}
// 2048 elements x up to 4 buffers stays inside L1/L2 between the block's passes.
inline constexpr std::size_t block = 2048;

template <class F>
void blocked(std::size_t n, F&& f) {
  for (std::size_t begin = 0; begin < n; begin += block) f(begin, std::min(block, n - begin));
}
}  // namespace cpu_kernels

template <class T>
using const_span = std::type_identity_t<std::span<const T>>;  // converts from std::span<T>

/// dst = w * src (the send buffer of a weighted all-reduce).
template <class T>
void scale(cpu, std::span<T> dst, const_span<T> src, T w) {
  cpu_kernels::map(dst) = w * cpu_kernels::map(src);
}

/// dst = src.
template <class T>
void copy(cpu, std::span<T> dst, const_span<T> src) {
  std::copy(src.begin(), src.end(), dst.begin());
}

/// One local update step, PyTorch's SGD semantics:
///   d = g + lambda*x;  v = mu*v + d (if mu > 0);  d = d + mu*v (Nesterov) or v;  x = x - lr*d.
/// `velocity` is empty when mu = 0. Each special case evaluates exactly the written formula
/// (no `+ 0*x` when lambda = 0), so plain SGD is bitwise `x - lr*g`.
template <class T>
void local_update(cpu, std::span<T> x, const_span<T> g, std::span<T> velocity, T lr, T mu,
                  T lambda, bool nesterov) {
  using namespace cpu_kernels;
  if (mu == T(0)) {
    if (lambda == T(0))
      map(x) -= lr * map(g);
    else
      map(x) -= lr * (map(g) + lambda * map(x));
    return;
  }
  blocked(x.size(), [&](std::size_t b, std::size_t n) {
    auto xs = map(x.subspan(b, n));
    auto gs = map(g.subspan(b, n));
    auto vs = map(velocity.subspan(b, n));
    if (lambda == T(0)) {
      vs = mu * vs + gs;
      if (nesterov)
        xs -= lr * (gs + mu * vs);
      else
        xs -= lr * vs;
    } else {
      vs = mu * vs + (gs + lambda * xs);
      if (nesterov)
        xs -= lr * ((gs + lambda * xs) + mu * vs);
      else
        xs -= lr * vs;
    }
  });
}

/// CoCoD-SGD's round end, one pass over three buffers. On entry `send` holds the average
/// xbar = sum_j w_j a_j of the anchors; on exit
///   x = x + (xbar - anchor);  anchor = x;  send = w * x.
/// With one worker xbar == anchor bitwise, so x gains an exact zero.
template <class T>
void round_end(cpu, std::span<T> x, std::span<T> anchor, std::span<T> send, T w) {
  using namespace cpu_kernels;
  blocked(x.size(), [&](std::size_t b, std::size_t n) {
    auto xs = map(x.subspan(b, n));
    auto as = map(anchor.subspan(b, n));
    auto ss = map(send.subspan(b, n));
    xs += ss - as;
    as = xs;
    ss = w * xs;
  });
}

/// The outer optimizer's step (SGD with momentum, PyTorch semantics) on the pseudo-gradient
/// Delta = z - abar:
///   beta = 0:  z = z - eta * Delta                              (`b` unused, may be empty)
///   else:      b = Delta (first step) or beta * b + Delta;  z = z - eta * (Delta + beta * b)
///              (Nesterov) or z - eta * b (heavy ball).
template <class T>
void outer_step(cpu, std::span<T> z, const_span<T> abar, std::span<T> b, T eta, T beta, bool nesterov, bool first) {
  using namespace cpu_kernels;
  if (beta == T(0)) {
    map(z) -= eta * (map(z) - map(abar));
    return;
  }
  blocked(z.size(), [&](std::size_t o, std::size_t n) {
    auto zs = map(z.subspan(o, n));
    auto as = map(abar.subspan(o, n));
    auto bs = map(b.subspan(o, n));
    if (first)
      bs = zs - as;
    else
      bs = beta * bs + (zs - as);
    if (nesterov)
      zs -= eta * ((zs - as) + beta * bs);
    else
      zs -= eta * bs;
  });
}

/// CoCoD's add-back: x = x + (z - anchor), the local progress since the snapshot kept.
template <class T>
void add_back(cpu, std::span<T> x, const_span<T> anchor, const_span<T> z) {
  cpu_kernels::map(x) += cpu_kernels::map(z) - cpu_kernels::map(anchor);
}

/// The snapshot that is posted: anchor = x;  send = w * x.
template <class T>
void snapshot(cpu, std::span<T> anchor, std::span<T> send, const_span<T> x, T w) {
  using namespace cpu_kernels;
  blocked(x.size(), [&](std::size_t o, std::size_t n) {
    auto xs = map(x.subspan(o, n));
    map(anchor.subspan(o, n)) = xs;
    map(send.subspan(o, n)) = w * xs;
  });
}

/// The lerp merge: x = (1 - alpha) * z + alpha * x.
template <class T>
void lerp(cpu, std::span<T> x, const_span<T> z, T alpha) {
  cpu_kernels::map(x) = (T(1) - alpha) * cpu_kernels::map(z) + alpha * cpu_kernels::map(x);
}

/// Overlap-Local-SGD's round end, one pass: x = x - alpha * (x - z);  v = mu * v + (z - x)
/// (v = z - x when mu = 0);  send = w * (z - v).
template <class T>
void pull_back(cpu, std::span<T> x, const_span<T> z, std::span<T> v, std::span<T> send, T alpha, T mu, T w) {
  using namespace cpu_kernels;
  blocked(x.size(), [&](std::size_t o, std::size_t n) {
    auto xs = map(x.subspan(o, n));
    auto zs = map(z.subspan(o, n));
    auto vs = map(v.subspan(o, n));
    xs -= alpha * (xs - zs);
    if (mu == T(0))
      vs = zs - xs;
    else
      vs = mu * vs + (zs - xs);
    map(send.subspan(o, n)) = w * (zs - vs);
  });
}

/// True when every element is finite (no NaN, no infinity): one read of the buffer. x * 0 is 0
/// for a finite x and NaN otherwise, so the sum is NaN exactly when some element is not finite;
/// unlike a test per element, the sum vectorizes and runs at memory speed (the kernels benchmark).
template <class T>
[[nodiscard]] bool all_finite(cpu, std::span<T> x) {
  using V = std::remove_const_t<T>;
  return (cpu_kernels::map(std::span<const V>(x)) * V(0)).sum() == V(0);
}
/// x = 0 (a worker's contribution withheld from a reduction).
template <class T>
void zero(cpu, std::span<T> x) {
  std::fill(x.begin(), x.end(), T(0));
}

/// Writes values into host memory at buffer[offset...] (the control slots of a reduced buffer).
template <class T>
void store(cpu, std::span<T> buffer, std::size_t offset, std::type_identity_t<std::span<const T>> values) {
  for (std::size_t i = 0; i < values.size(); ++i) buffer[offset + i] = values[i];
}
/// Reads buffer[offset...] into values.
template <class T>
void load(cpu, std::type_identity_t<const_span<T>> buffer, std::size_t offset, std::span<T> values) {
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = buffer[offset + i];
}

}  // namespace cocod::backend
