#pragma once
// Test models and helpers shared by the test files (test code, not library code).
#include <Eigen/Core>

#include <cstddef>
#include <span>
#include <vector>

#include "cocod/data/sampler.hpp"

namespace cocod_test {

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

}  // namespace cocod_test
