#pragma once
// Fashion-MNIST shards and two models on them, written on Eigen with cocod::ParameterPack:
// a multilayer perceptron (784-256-128-10, ReLU, softmax cross-entropy) and multinomial logistic
// regression. Example code, not part of the library.
#include <Eigen/Core>

#include <cocod.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "idx.hpp"

namespace fmnist {

using Matrix = Eigen::MatrixXf;
using Vector = Eigen::VectorXf;

/// How pixels become inputs: (p / 255 - mean) / deviation.
struct Scaling {
  float mean = 0.0f, deviation = 1.0f;
};

/// The training set's pixel mean and standard deviation (of p / 255), so that inputs are centred
/// and of unit variance (an MLP learns faster on them than on [0, 1]).
inline Scaling standardize(const idx::Dataset& d) {
  double sum = 0, squares = 0;
  for (std::uint8_t p : d.images) {
    const double v = p / 255.0;
    sum += v;
    squares += v * v;
  }
  const double n = static_cast<double>(d.images.size());
  const double mean = sum / n;
  return {static_cast<float>(mean), static_cast<float>(std::sqrt(std::max(1e-12, squares / n - mean * mean)))};
}

/// Samples as columns (scaled pixels), and their labels.
struct Shard {
  Matrix x;
  std::vector<int> y;
  [[nodiscard]] std::size_t size() const { return y.size(); }
};

inline Shard to_shard(const idx::Dataset& d, const std::vector<std::size_t>& which, Scaling scaling = {}) {
  Shard s{Matrix(static_cast<Eigen::Index>(d.pixels), static_cast<Eigen::Index>(which.size())), {}};
  s.y.reserve(which.size());
  for (std::size_t j = 0; j < which.size(); ++j) {
    const std::uint8_t* p = &d.images[which[j] * d.pixels];
    for (std::size_t i = 0; i < d.pixels; ++i) s.x(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = (p[i] / 255.0f - scaling.mean) / scaling.deviation;
    s.y.push_back(d.labels[which[j]]);
  }
  return s;
}

/// Fashion-MNIST's training and test sets from `dir`, or nothing after telling stderr why (and
/// which Debian package holds them), as `program`.
/// Every sample of `d`, in order (the test set as one shard).
inline std::vector<std::size_t> every_sample(const idx::Dataset& d) {
  std::vector<std::size_t> all(d.count);
  std::iota(all.begin(), all.end(), std::size_t{0});
  return all;
}

/// Worker `rank`'s part of the training set: a random (IID) split, or with by_label a split in
/// which each worker mostly sees a few classes (samples sorted by label, dealt in contiguous runs).
inline Shard shard(const idx::Dataset& d, int rank, int workers, bool by_label, std::uint64_t seed, Scaling scaling = {}) {
  std::vector<std::size_t> order(d.count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  cocod::Rng rng(seed);
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  if (by_label) std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return d.labels[a] < d.labels[b]; });
  const std::size_t n = d.count / static_cast<std::size_t>(workers);
  std::vector<std::size_t> mine(order.begin() + static_cast<long>(n * static_cast<std::size_t>(rank)),
                                order.begin() + static_cast<long>(n * static_cast<std::size_t>(rank + 1)));
  return to_shard(d, mine, scaling);
}

/// Softmax cross-entropy of logits Z (10 x M) against labels: returns the mean loss and turns Z
/// into dL/dZ (already divided by M).
inline double softmax_cross_entropy(Matrix& Z, const std::vector<int>& labels) {
  double loss = 0;
  const float inv = 1.0f / static_cast<float>(Z.cols());
  for (Eigen::Index j = 0; j < Z.cols(); ++j) {
    auto z = Z.col(j);
    const float m = z.maxCoeff();
    z = (z.array() - m).exp().matrix();
    const float sum = z.sum();
    z /= sum;
    loss -= std::log(std::max(z(labels[static_cast<std::size_t>(j)]), 1e-30f));
    z(labels[static_cast<std::size_t>(j)]) -= 1.0f;
    z *= inv;
  }
  return loss / static_cast<double>(Z.cols());
}

/// Layers of sizes {784, h1, ..., 10}, ReLU between them. With no hidden layer it is
/// multinomial logistic regression.
class Network {
 public:
  Network(Shard data, std::vector<int> sizes, std::uint64_t seed) : data_(std::move(data)), sizes_(std::move(sizes)) {
    std::vector<cocod::TensorShape> shapes;
    for (std::size_t l = 0; l + 1 < sizes_.size(); ++l) {
      shapes.push_back({"W" + std::to_string(l), sizes_[l + 1], sizes_[l]});
      shapes.push_back({"b" + std::to_string(l), sizes_[l + 1], 1});
    }
    pack_ = cocod::ParameterPack<float>(shapes);
    cocod::Rng rng(seed);  // He-uniform weights, zero biases (the same on every worker)
    for (std::size_t l = 0; l + 1 < sizes_.size(); ++l) {
      auto W = pack_.matrix(2 * l);
      const float a = std::sqrt(6.0f / static_cast<float>(sizes_[l]));
      for (Eigen::Index i = 0; i < W.size(); ++i) W.data()[i] = static_cast<float>(rng.uniform() * 2 - 1) * a;
    }
    activations_.resize(sizes_.size());
  }

  std::span<float> parameters() { return pack_.parameters(); }
  std::size_t num_samples() const { return data_.size(); }

  double loss_and_gradient(std::span<const std::size_t> batch, std::span<float> gradient) {
    const auto M = static_cast<Eigen::Index>(batch.size());
    Matrix& X = activations_[0];
    X.resize(data_.x.rows(), M);
    labels_.resize(batch.size());
    for (Eigen::Index j = 0; j < M; ++j) {
      X.col(j) = data_.x.col(static_cast<Eigen::Index>(batch[static_cast<std::size_t>(j)]));
      labels_[static_cast<std::size_t>(j)] = data_.y[batch[static_cast<std::size_t>(j)]];
    }
    const std::size_t L = sizes_.size() - 1;
    for (std::size_t l = 0; l < L; ++l) forward_layer(l);
    Matrix& delta = activations_[L];  // logits -> dL/dlogits
    const double loss = softmax_cross_entropy(delta, labels_);
    for (std::size_t l = L; l-- > 0;) {
      auto gW = pack_.matrix(2 * l, gradient);
      auto gb = pack_.matrix(2 * l + 1, gradient);
      gW.noalias() = delta * activations_[l].transpose();
      gb = delta.rowwise().sum();
      if (l == 0) break;
      back_.noalias() = pack_.matrix(2 * l).transpose() * delta;
      back_.array() *= (activations_[l].array() > 0.0f).cast<float>();  // ReLU'
      delta.swap(back_);
    }
    return loss;
  }

  /// Accuracy on a dataset, in batches.
  double accuracy(const Shard& test) {
    std::size_t right = 0;
    const std::size_t L = sizes_.size() - 1;
    for (std::size_t begin = 0; begin < test.size(); begin += 1000) {
      const auto n = static_cast<Eigen::Index>(std::min<std::size_t>(1000, test.size() - begin));
      activations_[0] = test.x.middleCols(static_cast<Eigen::Index>(begin), n);
      for (std::size_t l = 0; l < L; ++l) forward_layer(l);
      for (Eigen::Index j = 0; j < n; ++j) {
        Eigen::Index k;
        activations_[L].col(j).maxCoeff(&k);
        right += static_cast<int>(k) == test.y[begin + static_cast<std::size_t>(j)];
      }
    }
    return static_cast<double>(right) / static_cast<double>(test.size());
  }

 private:
  void forward_layer(std::size_t l) {
    const std::size_t L = sizes_.size() - 1;
    Matrix& out = activations_[l + 1];
    out.noalias() = pack_.matrix(2 * l) * activations_[l];
    out.colwise() += pack_.matrix(2 * l + 1).col(0);
    if (l + 1 < L) out = out.cwiseMax(0.0f);
  }

  Shard data_;
  std::vector<int> sizes_;
  cocod::ParameterPack<float> pack_;
  std::vector<Matrix> activations_;  // input, hidden layers, logits (grown once, then reused)
  Matrix back_;
  std::vector<int> labels_;
};

inline std::vector<int> mlp_sizes() { return {784, 256, 128, 10}; }
inline std::vector<int> logistic_sizes() { return {784, 10}; }

}  // namespace fmnist
