// comm::Nccl on the GPUs of this machine (all of them, one worker thread each): collectives, and
// every algorithm agreeing with comm::Threads on device parameters. Skipped without a device.
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/comm/nccl.hpp>

#include <thrust/device_vector.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
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

TEST_CASE("NCCL all_to_all and all_gather of device bytes") {
  const auto devices = all_devices();
  const int N = static_cast<int>(devices.size());
  constexpr std::size_t b = 1000;
  auto bytes = [](thrust::device_vector<unsigned char>& v) {
    return cocod::device_span<std::byte>(reinterpret_cast<std::byte*>(thrust::raw_pointer_cast(v.data())), v.size());
  };
  cocod::comm::Nccl::run(devices, [&](cocod::comm::Nccl comm) {
    const int r = comm.rank();
    std::vector<unsigned char> host(static_cast<std::size_t>(N) * b);
    for (int j = 0; j < N; ++j)  // block j, for rank j: 16 r + j
      std::fill_n(host.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(j) * b), b,
                  static_cast<unsigned char>(16 * r + j));
    thrust::device_vector<unsigned char> send(host.begin(), host.end()), recv(host.size()), all(host.size());
    auto request = comm.all_to_all_async(bytes(send), bytes(recv));
    request.wait();
    CHECK(request.ready());
    for (int q = 0; q < N; ++q) CHECK(recv[static_cast<std::size_t>(q) * b + b - 1] == 16 * q + r);
    comm.all_gather(bytes(send).first(b), bytes(all));
    for (int q = 0; q < N; ++q) CHECK(all[static_cast<std::size_t>(q) * b] == 16 * q);
    CHECK_THROWS_AS(comm.all_gather(bytes(send).first(b), bytes(all).first(b - 1)), std::invalid_argument);
  });
}

TEST_CASE("CoCoD-SGD on NCCL agrees with comm::Threads on the same device parameters") {
  const auto devices = all_devices();
  const int N = static_cast<int>(devices.size());
  const cocod::Options o{.learning_rate = 0.02, .period = 3, .batch_size = 8, .seed = 3};
  const cocod::update::Sgd sgd{.momentum = 0.9};
  std::vector<std::vector<double>> nccl(static_cast<std::size_t>(N)), threads(static_cast<std::size_t>(N));
  cocod::comm::Nccl::run(devices, [&](cocod::comm::Nccl comm) {
    cocod_test::DeviceLeastSquares<double> m(100, 11, 7 + static_cast<std::uint64_t>(comm.rank()));
    cocod::Optimizer<cocod_test::DeviceLeastSquares<double>, cocod::comm::Nccl> opt{comm, o, sgd};
    opt.optimize(m, cocod::Rounds{6});
    nccl[static_cast<std::size_t>(comm.rank())] = std::vector<double>(m.x.begin(), m.x.end());
  });
  cocod::comm::Threads::run(N, [&](cocod::comm::Threads comm) {
    cudaSetDevice(devices[static_cast<std::size_t>(comm.rank())]);
    cocod_test::DeviceLeastSquares<double> m(100, 11, 7 + static_cast<std::uint64_t>(comm.rank()));
    cocod::Optimizer<cocod_test::DeviceLeastSquares<double>, cocod::comm::Threads> opt{comm, o, sgd};
    opt.optimize(m, cocod::Rounds{6});
    threads[static_cast<std::size_t>(comm.rank())] = std::vector<double>(m.x.begin(), m.x.end());
  });
  for (int r = 0; r < N; ++r)
    for (std::size_t j = 0; j < nccl[0].size(); ++j)
      CHECK(nccl[static_cast<std::size_t>(r)][j] == doctest::Approx(threads[static_cast<std::size_t>(r)][j]).epsilon(1e-9));
}
