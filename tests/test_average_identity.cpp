// The identity of CoCoD-SGD (docs/algorithm.md): the weighted average xhat = sum_i w_i x_i of CoCoD-SGD's worker models
// moves exactly like mini-batch SGD: xhat_{t+1} = xhat_t - lr * sum_i w_i d_i(t), the round-end
// correction leaving xhat unchanged. Checked at every step, 3 workers of unequal batch size.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <Eigen/Core>

#include <vector>

#include "support.hpp"

namespace {
using Model = cocod_test::LeastSquares<double>;
using Vec = Eigen::VectorXd;

void check_identity(std::size_t period, double momentum) {
  constexpr int workers = 3;
  constexpr std::size_t steps = 26;
  const cocod::Options options{.learning_rate = 0.05, .period = period, .batch_size = 4, .speeds = {1.0, 2.0, 3.0}, .seed = 11};
  const cocod::update::Sgd sgd{.momentum = momentum, .weight_decay = 1e-3};
  // per worker, per step: the model after the step and the local direction d_i(t) it applied
  std::vector<std::vector<Vec>> after(workers), direction(workers);
  std::vector<double> weight(workers);
  Vec start;
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    Model model(120, 9, 500 + r);
    cocod::CoCoDSGD<Model, cocod::comm::Threads> opt{comm, options, sgd};
    opt.begin(model);
    weight[r] = opt.info().weight;
    if (r == 0) start = Eigen::Map<Vec>(model.x.data(), 9);
    Vec velocity = Vec::Zero(9);
    for (std::size_t t = 0; t < steps; ++t) {
      const Vec before = Eigen::Map<Vec>(model.x.data(), 9);
      opt.step(model, opt.next_batch());
      const Vec g = Eigen::Map<Vec>(model.last_gradient.data(), 9);
      const Vec d = g + 1e-3 * before;
      velocity = momentum * velocity + d;
      direction[r].push_back(momentum > 0 ? velocity : d);
      after[r].push_back(Eigen::Map<Vec>(model.x.data(), 9));
    }
    opt.finish(model);
  });
  CHECK(weight[0] == doctest::Approx(1.0 / 6));
  CHECK(weight[2] == doctest::Approx(3.0 / 6));
  Vec xhat = start;
  double worst = 0;
  for (std::size_t t = 0; t < steps; ++t) {
    Vec next = Vec::Zero(9), predicted = xhat;
    for (std::size_t i = 0; i < workers; ++i) {
      next += weight[i] * after[i][t];
      predicted -= 0.05 * weight[i] * direction[i][t];
    }
    worst = std::max(worst, (next - predicted).norm() / next.norm());
    xhat = next;
  }
  CAPTURE(period);
  CAPTURE(momentum);
  CHECK(worst <= 1e-12);
  // ... while the workers' own models do differ (the test would pass vacuously otherwise)
  CHECK((after[0][steps - 2] - after[2][steps - 2]).norm() > 1e-6);
}
}  // namespace

TEST_CASE("xhat evolves like mini-batch SGD, k = 1") { check_identity(1, 0.0); }
TEST_CASE("xhat evolves like mini-batch SGD, k = 4") { check_identity(4, 0.0); }
TEST_CASE("xhat evolves like mini-batch SGD, k = 4, with local momentum") { check_identity(4, 0.9); }
