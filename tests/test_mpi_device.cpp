// comm::Mpi with device buffers (host staging), on Thrust's OMP device system: every algorithm
// trains device parameters like host parameters, under mpiexec at several process counts.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/comm/mpi.hpp>

#include <thrust/device_vector.h>

#include <cmath>
#include <vector>

#include "support_device.hpp"

namespace {
cocod::comm::Mpi* world = nullptr;


template <template <class...> class Algorithm>
void check() {
  const cocod::Options o{.learning_rate = 0.02, .period = 3, .batch_size = 6, .seed = 4};
  const cocod::update::Sgd sgd{.momentum = 0.9};
  const auto seed = 60 + static_cast<std::uint64_t>(world->rank());
  cocod_test::LeastSquares<double> host(90, 11, seed);
  cocod_test::DeviceLeastSquares<double> device(90, 11, seed);
  Algorithm<cocod_test::LeastSquares<double>, cocod::comm::Mpi>{*world, o, sgd}.optimize(host, cocod::Steps{20});
  Algorithm<cocod_test::DeviceLeastSquares<double>, cocod::comm::Mpi>{*world, o, sgd}.optimize(device, cocod::Steps{20});
  const std::vector<double> d(device.x.begin(), device.x.end());
  double worst = 0;
  for (std::size_t i = 0; i < d.size(); ++i) worst = std::max(worst, std::abs(d[i] - host.x[i]));
  CHECK(worst <= 1e-12);
  CHECK(host.x != cocod_test::LeastSquares<double>(90, 11, seed).x);
}
}  // namespace

TEST_CASE("device parameters over comm::Mpi match host parameters, every algorithm") {
  check<cocod::Optimizer>();
  check<cocod::SyncSGD>();
  check<cocod::LocalSGD>();
  check<cocod::PipeSGD>();
}

int main(int argc, char** argv) {
  cocod::comm::Mpi comm(argc, argv);
  world = &comm;
  doctest::Context context(argc, argv);
  const int failed = context.run();
  std::vector<double> failures{failed ? 1.0 : 0.0};
  comm.all_reduce(std::span<double>(failures));
  return failures[0] > 0 ? 1 : 0;
}
