#pragma once
// The device model of the include-order test, for a translation unit that has included both
// <cocod.hpp> and <cocod/backend/cuda.hpp> (in either order).
#include <thrust/copy.h>
#include <thrust/device_vector.h>

#include <span>
#include <vector>

#include "include_order.hpp"

namespace cocod_test {
struct CentresOnDevice {
  int rank = 0;
  thrust::device_vector<float> x = thrust::device_vector<float>(16, 0.0f);
  thrust::device_vector<float>& parameters() { return x; }
  std::size_t num_samples() const { return 40; }
  double loss_and_gradient(std::span<const std::size_t> batch, cocod::device_span<float> g) {
    std::vector<float> host_x(x.begin(), x.end()), host_g(x.size());
    const double loss = centre_gradient(host_x, rank, std::vector<std::size_t>(batch.begin(), batch.end()), host_g.data());
    cocod::backend::copy_from_host(host_g.data(), g);
    return loss;
  }
};

}  // namespace cocod_test
