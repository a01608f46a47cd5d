// comm::Nccl on the GPUs of this machine (all of them, one worker thread each): collectives, and
// every algorithm agreeing with comm::Threads on device parameters. Skipped without a device.
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/comm/nccl.hpp>

#include <thrust/device_vector.h>

#include <vector>

#include "support_device.hpp"

namespace {
std::vector<int> all_devices() {
  int n = 0;
  cudaGetDeviceCount(&n);
  std::vector<int> d(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) d[static_cast<std::size_t>(i)] = i;
  return d;
}

}  // namespace

TEST_CASE("NCCL all_reduce and broadcast on device and host buffers") {
  const auto devices = all_devices();
  const int N = static_cast<int>(devices.size());
  cocod::comm::Nccl::run(devices, [&](cocod::comm::Nccl comm) {
    thrust::device_vector<float> v(1000, static_cast<float>(comm.rank() + 1));
    comm.all_reduce(cocod::as_span(v));
    CHECK(v[999] == static_cast<float>(N * (N + 1) / 2));
    std::vector<double> h{static_cast<double>(comm.rank())};
    comm.broadcast(std::span<double>(h), N - 1);
    CHECK(h[0] == N - 1);
    auto r = comm.all_reduce_async(cocod::as_span(v));
    r.wait();
    CHECK(v[0] == static_cast<float>(N * N * (N + 1) / 2));
  });
}

TEST_CASE("CoCoD-SGD on NCCL agrees with comm::Threads on the same device parameters") {
  const auto devices = all_devices();
  const int N = static_cast<int>(devices.size());
  const cocod::Options o{.learning_rate = 0.02, .momentum = 0.9, .period = 3, .batch_size = 8, .seed = 3};
  std::vector<std::vector<double>> nccl(static_cast<std::size_t>(N)), threads(static_cast<std::size_t>(N));
  cocod::comm::Nccl::run(devices, [&](cocod::comm::Nccl comm) {
    cocod_test::DeviceLeastSquares<double> m(100, 11, 7 + static_cast<std::uint64_t>(comm.rank()));
    cocod::Optimizer<cocod_test::DeviceLeastSquares<double>, cocod::comm::Nccl> opt{comm, o};
    opt.optimize(m, cocod::Rounds{6});
    nccl[static_cast<std::size_t>(comm.rank())] = std::vector<double>(m.x.begin(), m.x.end());
  });
  cocod::comm::Threads::run(N, [&](cocod::comm::Threads comm) {
    cudaSetDevice(devices[static_cast<std::size_t>(comm.rank())]);
    cocod_test::DeviceLeastSquares<double> m(100, 11, 7 + static_cast<std::uint64_t>(comm.rank()));
    cocod::Optimizer<cocod_test::DeviceLeastSquares<double>, cocod::comm::Threads> opt{comm, o};
    opt.optimize(m, cocod::Rounds{6});
    threads[static_cast<std::size_t>(comm.rank())] = std::vector<double>(m.x.begin(), m.x.end());
  });
  for (int r = 0; r < N; ++r)
    for (std::size_t j = 0; j < nccl[0].size(); ++j)
      CHECK(nccl[static_cast<std::size_t>(r)][j] == doctest::Approx(threads[static_cast<std::size_t>(r)][j]).epsilon(1e-9));
}
