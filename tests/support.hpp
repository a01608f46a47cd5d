#pragma once
// Test models and helpers shared by the test files (test code, not library code).
#include <Eigen/Core>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/algorithm/trainer.hpp"
#include "cocod/data/sampler.hpp"
#include "cocod/family/compress.hpp"
#include "cocod/family/delay.hpp"
#include "cocod/family/fragments.hpp"
#include "cocod/family/outer.hpp"
#include "cocod/family/pull_back.hpp"
#include "cocod/update/adam.hpp"
#include "cocod/update/clip.hpp"
#include "cocod/update/sgd.hpp"

namespace cocod_test {

/// The settings of a test run: the run's options, the local update's, and the family's, of which
/// make() gives each algorithm those it takes.
struct Setup {
  cocod::Options options;
  cocod::update::Sgd sgd{};
  cocod::update::Adam adam{};
  cocod::update::AdamW adamw{};
  std::optional<cocod::Outer> outer{};
  cocod::Compress compress{};
  cocod::Fragments fragments{};
  cocod::PullBack pull{};
  cocod::OverlapDepth depth{};
  cocod::Delay delay{};
};

template <class S, class Tuple>
struct takes;
template <class S, class... E>
struct takes<S, std::tuple<E...>> : std::bool_constant<(std::is_same_v<S, E> || ...)> {};

/// The settings of `s` that algorithm A (a cocod::Trainer) takes, as a tuple of parts.
template <class A>
auto family_of(const Setup& s) {
  using S = typename A::settings_type;
  auto one = [](auto v) {
    if constexpr (takes<decltype(v), S>::value) return std::tuple<decltype(v)>(v);
    else return std::tuple<>();
  };
  return std::tuple_cat(one(s.outer), one(s.compress), one(s.fragments), one(s.pull), one(s.depth), one(s.delay));
}

/// The update rule U with the settings of `s` (s.sgd, s.adam, s.adamw; a ClipGradNorm wraps the
/// one of its inner rule with max_norm 1), or U's defaults.
template <class U>
U update_of(const Setup& s) {
  if constexpr (std::is_same_v<U, cocod::update::Sgd>) return s.sgd;
  else if constexpr (std::is_same_v<U, cocod::update::Adam>) return s.adam;
  else if constexpr (std::is_same_v<U, cocod::update::AdamW>) return s.adamw;
  else if constexpr (requires { U{}.inner; }) return U{.max_norm = 1.0, .inner = update_of<decltype(U{}.inner)>(s)};
  else return U{};
}

/// Algorithm A on `comm` with the settings of `s` it takes (its Update's: update_of), and
/// `extra` parts (a schedule).
template <class A, class Comm, class... Extra>
A make(Comm comm, const Setup& s, Extra&&... extra) {
  auto parts = std::tuple_cat(family_of<A>(s), std::forward_as_tuple(std::forward<Extra>(extra)...));
  return std::apply(
      [&](auto&&... p) {
        return A(std::move(comm), s.options, update_of<typename A::update_type>(s), std::forward<decltype(p)>(p)...);
      },
      std::move(parts));
}

/// A measuring schedule with scripted plans, so that a run that re-plans is reproducible to the
/// bit: a window closes after every round and each re-plan moves to the entry of `script` after
/// the one in force (the same on every worker, whatever was measured).
struct Scripted {
  std::vector<std::pair<std::size_t, std::size_t>> script;  // (period, hiding steps), in turn
  void validate() const {}
  [[nodiscard]] cocod::schedule::Plan plan(const cocod::Options& o, int rank, int workers) const {
    cocod::schedule::Plan p = cocod::schedule::Fixed<>{}.plan(o, rank, workers);
    p.period = script[0].first;
    p.hiding_steps = script[0].second;
    return p;
  }
  [[nodiscard]] double learning_rate(const cocod::Options& o, std::size_t, std::size_t) const { return o.learning_rate; }
  [[nodiscard]] bool window_closes(std::size_t) const noexcept { return true; }
  [[nodiscard]] cocod::schedule::Plan replan(const cocod::Options&, int, int, std::size_t, const cocod::schedule::Plan& current,
                                             const cocod::schedule::Measured&) const {
    std::size_t i = 0;
    while (i < script.size() && script[i] != std::pair{current.period, current.hiding_steps}) ++i;
    cocod::schedule::Plan p = current;
    std::tie(p.period, p.hiding_steps) = script[(i + 1) % script.size()];
    return p;
  }
};

/// Least squares on a synthetic shard: f(x) = mean_i 0.5 (a_i . x - b_i)^2. Records the last
/// gradient it returned, so tests can recompute updates independently.
template <class T>
struct LeastSquares {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  Matrix A;  // d x n, one sample per column
  Vector b;
  std::vector<T> x;
  std::vector<T> last_gradient;

  LeastSquares(std::size_t samples, std::size_t dim, std::uint64_t seed) : A(dim, samples), b(samples), x(dim) {
    cocod::Rng rng(seed);
    for (Eigen::Index j = 0; j < A.cols(); ++j) {
      for (Eigen::Index i = 0; i < A.rows(); ++i) A(i, j) = static_cast<T>(rng.uniform() * 2 - 1);
      b(j) = static_cast<T>(rng.uniform() * 2 - 1);
    }
    for (auto& v : x) v = static_cast<T>(rng.uniform() - 0.5);
    last_gradient.assign(dim, T(0));
  }

  std::span<T> parameters() { return x; }
  std::size_t num_samples() const { return static_cast<std::size_t>(A.cols()); }
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<T> g) {
    Eigen::Map<const Vector> xv(x.data(), static_cast<Eigen::Index>(x.size()));
    Eigen::Map<Vector> gv(g.data(), static_cast<Eigen::Index>(g.size()));
    gv.setZero();
    double loss = 0;
    const T inv = T(1) / static_cast<T>(batch.size());
    for (auto i : batch) {
      const auto col = A.col(static_cast<Eigen::Index>(i));
      const T r = col.dot(xv) - b(static_cast<Eigen::Index>(i));
      gv += (inv * r) * col;
      loss += 0.5 * static_cast<double>(r) * static_cast<double>(r);
    }
    std::copy(g.begin(), g.end(), last_gradient.begin());
    return loss / static_cast<double>(batch.size());
  }
};

/// Plain scalar SGD with PyTorch's momentum / Nesterov / weight decay, written out element by
/// element: the reference the library's fused kernels must match.
template <class T>
struct PlainSgd {
  T momentum = 0, weight_decay = 0;
  bool nesterov = false;
  std::vector<T> v;
  void apply(std::vector<T>& x, const std::vector<T>& g, T lr) {
    if (v.empty()) v.assign(x.size(), T(0));
    for (std::size_t j = 0; j < x.size(); ++j) {
      T d = g[j];
      if (weight_decay != T(0)) d = d + weight_decay * x[j];
      if (momentum != T(0)) {
        v[j] = momentum * v[j] + d;
        d = nesterov ? d + momentum * v[j] : v[j];
      }
      x[j] = x[j] - lr * d;
    }
  }
};

/// Plain scalar Adam and AdamW in torch::optim's order of operations, written out element by
/// element: the reference the library's fused kernel must match.
template <class T>
struct PlainAdam {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = true;
  std::vector<T> m, v;
  std::uint64_t t = 0;
  template <bool Decoupled>
  static PlainAdam of(const cocod::update::detail::AdamRule<Decoupled>& a) {
    return {a.beta1, a.beta2, a.eps, a.weight_decay, Decoupled, {}, {}, 0};
  }
  void apply(std::vector<T>& x, const std::vector<T>& g, T lr) {
    if (m.empty()) m.assign(x.size(), T(0)), v.assign(x.size(), T(0));
    ++t;
    const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(t)), bias2 = 1.0 - std::pow(beta2, static_cast<double>(t));
    const auto step_size = static_cast<T>(static_cast<double>(lr) / bias1);
    const auto bias2_sqrt = static_cast<T>(std::sqrt(bias2));
    for (std::size_t j = 0; j < x.size(); ++j) {
      T d = g[j];
      if (weight_decay != 0 && decoupled) x[j] = x[j] * static_cast<T>(1.0 - static_cast<double>(lr) * weight_decay);
      if (weight_decay != 0 && !decoupled) d = d + static_cast<T>(weight_decay) * x[j];
      m[j] = static_cast<T>(beta1) * m[j] + static_cast<T>(1.0 - beta1) * d;
      v[j] = static_cast<T>(beta2) * v[j] + static_cast<T>(1.0 - beta2) * d * d;
      x[j] = x[j] - step_size * (m[j] / (std::sqrt(v[j]) / bias2_sqrt + static_cast<T>(eps)));
    }
  }
};

}  // namespace cocod_test
