#pragma once
// A test model with device parameters (thrust::device_vector): the least-squares model of
// support.hpp, whose gradient is computed by the host model (copies in and out). What is under
// test is the optimizer's device path (buffers, kernels, staging, NCCL), not a device gradient.
#include <thrust/copy.h>
#include <thrust/device_vector.h>

#include <cocod.hpp>

#include <vector>

#include "support.hpp"

namespace cocod_test {

template <class T>
struct DeviceLeastSquares {
  LeastSquares<T> host;
  thrust::device_vector<T> x;
  DeviceLeastSquares(std::size_t samples, std::size_t dim, std::uint64_t seed)
      : host(samples, dim, seed), x(host.x.begin(), host.x.end()) {}
  thrust::device_vector<T>& parameters() { return x; }
  std::size_t num_samples() const { return host.num_samples(); }
  double loss_and_gradient(std::span<const std::size_t> batch, cocod::device_span<T> gradient) {
    thrust::copy(x.begin(), x.end(), host.x.begin());
    std::vector<T> g(host.x.size());
    const double loss = host.loss_and_gradient(batch, g);
    cocod::backend::copy_from_host(g.data(), gradient);
    return loss;
  }
  std::vector<T> values() const { return std::vector<T>(x.begin(), x.end()); }
};

}  // namespace cocod_test
