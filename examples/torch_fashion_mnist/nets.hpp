#pragma once
// The two libtorch networks of the example: a small CNN (two convolutions with max pooling, two
// linear layers) and the MLP 784-256-128-10 of the Eigen example. Example code.
#include <torch/torch.h>

#include <cstdint>
#include <mutex>
#include <string>

namespace nets {

/// Two 5x5 convolutions (1 -> 16 -> 32 channels), each followed by ReLU and 2x2 max pooling,
/// then 512 -> 128 -> 10. Inputs: [batch, 1, 28, 28].
inline torch::nn::Sequential cnn() {
  namespace nn = torch::nn;
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 5)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Conv2d(nn::Conv2dOptions(16, 32, 5)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Flatten(), nn::Linear(32 * 4 * 4, 128), nn::ReLU(), nn::Linear(128, 10));
}

/// 784 -> 256 -> 128 -> 10 with ReLU. Inputs: [batch, 784].
inline torch::nn::Sequential mlp() {
  namespace nn = torch::nn;
  return nn::Sequential(nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 128), nn::ReLU(), nn::Linear(128, 10));
}

/// The network `name` with libtorch's default initialisation from `seed`. libtorch draws from one
/// generator per process, so workers that build theirs at once (threads) take turns.
inline torch::nn::Sequential make(const std::string& name, std::uint64_t seed) {
  static std::mutex generator;
  std::lock_guard lock(generator);
  torch::manual_seed(seed);
  return name == "cnn" ? cnn() : mlp();
}

/// The shape of one sample as the network takes it.
inline std::vector<std::int64_t> sample_shape(const std::string& name) {
  return name == "cnn" ? std::vector<std::int64_t>{1, 28, 28} : std::vector<std::int64_t>{784};
}

}  // namespace nets
