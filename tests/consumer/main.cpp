// Trains a one-parameter mean estimate with CoCoD-SGD on two in-process workers.
#include <cocod.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  int failures = 0;
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    const double target = 3.0 + comm.rank();  // the workers' mean is 3.5
    auto model = cocod::make_model(std::vector<double>{0.0}, 64,
        [&](std::span<const std::size_t>, std::span<const double> x, std::span<double> g) {
          g[0] = x[0] - target;
          return 0.5 * g[0] * g[0];
        });
    cocod::Optimizer<decltype(model), cocod::comm::Threads> opt{
        comm, {.learning_rate = 0.1, .period = 4, .batch_size = 8}};
    opt.optimize(model, cocod::Epochs{20});
    if (std::abs(model.parameters()[0] - 3.5) > 1e-3) ++failures;
    if (comm.rank() == 0) std::printf("consensus %.6f (expected 3.5)\n", model.parameters()[0]);
  });
  return failures == 0 ? 0 : 1;
}
