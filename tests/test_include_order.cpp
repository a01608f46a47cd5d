// Include order never matters: <cocod.hpp> and <cocod/backend/cuda.hpp> in either order train
// device parameters exactly as host parameters are trained (both orders are compiled, without
// COCOD_DEVICE_BACKEND, in include_order_*.cpp).
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <span>
#include <vector>

#include "include_order.hpp"

namespace {
struct CentresOnHost {
  int rank = 0;
  std::vector<float> x = std::vector<float>(16, 0.0f);
  std::span<float> parameters() { return x; }
  std::size_t num_samples() const { return 40; }
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<float> g) {
    return cocod_test::centre_gradient(x, rank, std::vector<std::size_t>(batch.begin(), batch.end()), g);
  }
};
}  // namespace

TEST_CASE("both include orders give the device backend, and the same model as on the host") {
  const auto host = cocod_test::train_centres<CentresOnHost>();
  const auto cuda_first = cocod_test::train_device_cuda_first();
  const auto cocod_first = cocod_test::train_device_cocod_first();
  REQUIRE(host.size() == 16);
  CHECK(host[0] != 0.0f);  // it trained
  CHECK(cuda_first == host);
  CHECK(cocod_first == host);
}
