#pragma once
// The local update policies Adam and AdamW (PyTorch's semantics: bias correction, eps added after
// the square root; AdamW's weight decay decoupled from the gradient, Adam's an L2 term added to
// it). Their state (the first and second moments and the step count) is local to a worker, never
// averaged, and saved in checkpoints.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cocod/backend/backend.hpp"
#include "cocod/errors.hpp"

namespace cocod {
namespace backend {
namespace passes {
/// One Adam step per element, the formula picked at compile time: Decoupled (AdamW) shrinks x
/// by `decay` = 1 - lr wd first; otherwise (Adam) `decay` = wd is added to the gradient as an L2
/// term. Decay = false leaves both out (no `x * 1`, no `g + 0 x`). The order of every operation is
/// torch::optim's: m = beta1 m + (1 - beta1) g; v = beta2 v + ((1 - beta2) g) g;
/// x = x + (-step_size) (m / (sqrt(v) / bc2_sqrt + eps)).
template <class T, bool Decoupled, bool Decay>
struct AdamStep {
  T* x;
  const T* g;
  T* m;
  T* v;
  T beta1, one_minus_beta1, beta2, one_minus_beta2, neg_step_size, bc2_sqrt, eps, decay;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    T d = g[i];
    if constexpr (Decay && Decoupled) x[i] = x[i] * decay;
    if constexpr (Decay && !Decoupled) d = d + decay * x[i];
    m[i] = beta1 * m[i] + one_minus_beta1 * d;
    v[i] = beta2 * v[i] + one_minus_beta2 * d * d;
    const T denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    x[i] = x[i] + neg_step_size * (m[i] / denom);
  }
};
}  // namespace passes

namespace detail {
/// std::sqrt for Eigen's array expressions, vectorized with the processor's correctly rounded
/// square root on x86 (Eigen's own float sqrt is a fast approximation under EIGEN_FAST_MATH).
struct RoundedSqrt {
  template <class T>
  T operator()(const T& a) const {
    return std::sqrt(a);
  }
#if defined(EIGEN_VECTORIZE_SSE2) && !defined(EIGEN_VECTORIZE_AVX512)
  static constexpr bool packets = true;
  Eigen::internal::Packet4f packetOp(const Eigen::internal::Packet4f& a) const { return _mm_sqrt_ps(a); }
  Eigen::internal::Packet2d packetOp(const Eigen::internal::Packet2d& a) const { return _mm_sqrt_pd(a); }
#if defined(EIGEN_VECTORIZE_AVX)
  Eigen::internal::Packet8f packetOp(const Eigen::internal::Packet8f& a) const { return _mm256_sqrt_ps(a); }
  Eigen::internal::Packet4d packetOp(const Eigen::internal::Packet4d& a) const { return _mm256_sqrt_pd(a); }
#endif
#else
  static constexpr bool packets = false;  // elsewhere: std::sqrt, one element at a time
#endif
};
}  // namespace detail

/// On the CPU, passes::AdamStep's formula, operation for operation, as Eigen array expressions
/// over blocks that stay in the L1 cache: still one pass over memory, with the square roots and
/// divisions vectorized (a loop of std::sqrt is not, under the C library's errno rules), and the
/// same bits.
template <class T, bool Decoupled, bool Decay>
void adam_blocks(const passes::AdamStep<T, Decoupled, Decay>& p, std::size_t n) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  constexpr std::size_t block = 512;
  alignas(64) T l2[Decay && !Decoupled ? block : 1];
  for (std::size_t s = 0; s < n; s += block) {
    const auto len = static_cast<Eigen::Index>(std::min(block, n - s));
    Eigen::Map<Array> x(p.x + s, len), m(p.m + s, len), v(p.v + s, len);
    const Eigen::Map<const Array> g(p.g + s, len);
    const auto rest = [&](const auto& d) {
      m = p.beta1 * m + p.one_minus_beta1 * d;
      v = p.beta2 * v + p.one_minus_beta2 * d * d;
      x = x + p.neg_step_size * (m / (v.unaryExpr(detail::RoundedSqrt{}) / p.bc2_sqrt + p.eps));
    };
    if constexpr (Decay && Decoupled) x = x * p.decay;
    if constexpr (Decay && !Decoupled) {
      Eigen::Map<Array> d(l2, len);
      d = g + p.decay * x;
      rest(d);
    } else {
      rest(g);
    }
  }
}

/// The scalars of Adam's step `step` (1 for the first) at learning rate lr, computed in double as
/// torch::optim does, then rounded once to T.
template <class T>
struct AdamScalars {
  T neg_step_size, bc2_sqrt, decay;
  AdamScalars(double lr, double beta1, double beta2, double weight_decay, bool decoupled, std::uint64_t step) {
    const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    neg_step_size = static_cast<T>(-(lr / bc1));
    bc2_sqrt = static_cast<T>(std::sqrt(bc2));
    decay = static_cast<T>(decoupled ? 1.0 - lr * weight_decay : weight_decay);
  }
};

/// One Adam (decoupled = false) or AdamW (decoupled = true) step on x with gradient g, moments m
/// and v, at step `step` (counted from 1).
template <class B, class S>
void adam_update(B b, S x, read_only_t<S> g, S m, S v, double lr, double beta1, double beta2, double eps,
                 double weight_decay, bool decoupled, std::uint64_t step) {
  using T = element_t<S>;
  const AdamScalars<T> s(lr, beta1, beta2, weight_decay, decoupled, step);
  auto run = [&](auto decoupled_c, auto decay_c) {
    const passes::AdamStep<T, decltype(decoupled_c)::value, decltype(decay_c)::value> step{
        x.data(), g.data(), m.data(), v.data(), static_cast<T>(beta1), static_cast<T>(1.0 - beta1),
        static_cast<T>(beta2), static_cast<T>(1.0 - beta2), s.neg_step_size, s.bc2_sqrt, static_cast<T>(eps), s.decay};
    if constexpr (std::is_same_v<B, cpu>) adam_blocks(step, x.size());
    else for_each_index(b, x.size(), step);
  };
  using yes = std::true_type;
  using no = std::false_type;
  if (weight_decay == 0.0) run(no{}, no{});
  else if (decoupled) run(yes{}, yes{});
  else run(no{}, yes{});
}
}  // namespace backend
}  // namespace cocod

namespace Eigen::internal {
template <>
struct functor_traits<cocod::backend::detail::RoundedSqrt> {
  enum { Cost = 4 * NumTraits<float>::MulCost, PacketAccess = cocod::backend::detail::RoundedSqrt::packets };
};
}  // namespace Eigen::internal

namespace cocod {
namespace update {
namespace detail {
/// What Adam and AdamW share: settings, their checks, the state and its step.
template <bool Decoupled>
struct AdamRule {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = Decoupled ? 1e-2 : 0.0;

  static constexpr const char* name = Decoupled ? "update::AdamW" : "update::Adam";
  /// Throws std::invalid_argument naming the field that breaks its rule.
  void validate() const {
    const std::string type = Decoupled ? "cocod::update::AdamW" : "cocod::update::Adam";
    if (!(beta1 >= 0.0 && beta1 < 1.0)) invalid_setting(type, "beta1", "must be in [0, 1)", beta1);
    if (!(beta2 >= 0.0 && beta2 < 1.0)) invalid_setting(type, "beta2", "must be in [0, 1)", beta2);
    if (!(eps > 0.0) || !std::isfinite(eps)) invalid_setting(type, "eps", "must be a finite number > 0", eps);
    if (!(weight_decay >= 0.0) || !std::isfinite(weight_decay))
      invalid_setting(type, "weight_decay", "must be a finite number >= 0", weight_decay);
  }
  /// The settings a resumed run must share with the saved one.
  template <class Archive>
  void serialize(Archive& a) {
    a("beta1", beta1);
    a("beta2", beta2);
    a("eps", eps);
    a("weight_decay", weight_decay);
  }

  /// Per-run state of one worker, on the model's backend: the moments and the steps taken.
  template <class Backend, class T>
  struct State {
    backend::buffer<Backend, T> first_moment;
    backend::buffer<Backend, T> second_moment;
    std::uint64_t steps = 0;
    double beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;

    /// Applies one step with gradient g at learning rate lr (spans of the backend's memory).
    template <class Span>
    void apply(Span x, Span g, T lr) {
      ++steps;
      adam_update(Backend{}, x, g, first_moment.span(), second_moment.span(), static_cast<double>(lr), beta1, beta2,
                  eps, weight_decay, Decoupled, steps);
    }
    /// Forgets the moments and the step count (after a non-finite value reached them): the next
    /// step is a first step again, with its bias correction.
    void reset() {
      zero(Backend{}, first_moment.span());
      zero(Backend{}, second_moment.span());
      steps = 0;
    }
    /// Run state for a checkpoint.
    template <class Archive>
    void serialize(Archive& a) {
      a("first_moment", first_moment);
      a("second_moment", second_moment);
      a("steps", steps);
    }
  };

  /// The state of one worker for n parameters, at begin().
  template <class Backend, class T>
  [[nodiscard]] State<Backend, T> start(std::size_t parameters) const {
    State<Backend, T> s;
    s.beta1 = beta1;
    s.beta2 = beta2;
    s.eps = eps;
    s.weight_decay = weight_decay;
    s.first_moment.resize(parameters);
    s.second_moment.resize(parameters);
    return s;
  }
};
}  // namespace detail

/// Adam (Kingma and Ba), PyTorch's torch.optim.Adam without amsgrad: with d = g + wd x,
///
///     m = beta1 m + (1 - beta1) d;   v = beta2 v + (1 - beta2) d d
///     x = x - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
///
/// t counting this worker's steps from 1. Give it to an algorithm as its Update:
/// `cocod::LocalSGD<M, C, cocod::schedule::Fixed<>, cocod::update::Adam> opt{comm, options, cocod::update::Adam{}}`.
///
/// | field        | meaning                                     | default |
/// |--------------|---------------------------------------------|---------|
/// | beta1, beta2 | decay of the first and second moments, [0, 1) | 0.9, 0.999 |
/// | eps          | added after the square root, > 0            | 1e-8    |
/// | weight_decay | L2 coefficient wd >= 0, added to the gradient | 0     |
using Adam = detail::AdamRule<false>;

/// AdamW (Loshchilov and Hutter), PyTorch's torch.optim.AdamW without amsgrad: Adam's step on the
/// gradient itself, after the weights shrink by the decoupled decay, x = (1 - lr wd) x. The
/// inner optimizer of DiLoCo's recipe (with `cocod::Outer::diloco()` outside).
///
/// | field        | meaning                                     | default |
/// |--------------|---------------------------------------------|---------|
/// | beta1, beta2 | decay of the first and second moments, [0, 1) | 0.9, 0.999 |
/// | eps          | added after the square root, > 0            | 1e-8    |
/// | weight_decay | decoupled decay wd >= 0                     | 0.01    |
using AdamW = detail::AdamRule<true>;

}  // namespace update
}  // namespace cocod
