#pragma once
// The same run with device parameters in two translation units that include <cocod.hpp> and
// <cocod/backend/cuda.hpp> in opposite orders (include_order_*.cpp), and with host parameters.
#include <cocod.hpp>

#include <cstddef>
#include <vector>

namespace cocod_test {
std::vector<float> train_device_cuda_first();
std::vector<float> train_device_cocod_first();

// f(x) = mean_i 0.5 |x - c_i|^2 with c_i = (i % 5) + rank: the gradient is computed on the host.
template <class Span>
double centre_gradient(const std::vector<float>& x, int rank, const std::vector<std::size_t>& batch, Span g_host) {
  double loss = 0.0;
  for (std::size_t d = 0; d < x.size(); ++d) g_host[d] = 0.0f;
  for (auto i : batch)
    for (std::size_t d = 0; d < x.size(); ++d) {
      const float r = x[d] - static_cast<float>(i % 5 + static_cast<std::size_t>(rank) + d);
      g_host[d] += r / static_cast<float>(batch.size());
      loss += 0.5 * static_cast<double>(r) * static_cast<double>(r);
    }
  return loss / static_cast<double>(batch.size());
}
/// The run both orders and the host take: CoCoD-SGD with momentum, 2 workers, 10 steps; rank
/// 0's final model.
template <class Model>
std::vector<float> train_centres() {
  std::vector<float> result;
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Model model{comm.rank()};
    cocod::Optimizer<Model, cocod::comm::Threads> opt{comm, {.learning_rate = 0.1, .period = 3, .batch_size = 4}, cocod::update::Sgd{.momentum = 0.9}};
    (void)opt.optimize(model, cocod::Steps{10});
    if (comm.rank() == 0) result.assign(model.x.begin(), model.x.end());
  });
  return result;
}
}  // namespace cocod_test
