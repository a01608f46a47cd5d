// One worker per MPI process: each rank r pulls a single parameter towards 3 + r, and
// CoCoD-SGD finds their consensus, the mean 3 + (ranks - 1) / 2.
#include <cocod.hpp>
#include <cocod/comm/mpi.hpp>

#include <cmath>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <vector>

int main(int argc, char** argv) {
  return cocod::comm::Mpi::run(argc, argv, [](cocod::comm::Mpi comm) {
    const double target = 3.0 + comm.rank();
    // make_model(initial parameters, samples in this shard, gradient function): a model
    // from a plain function, here the loss (x - target)^2 / 2 for every sample.
    auto model = cocod::make_model(std::vector<double>{0.0}, 64,
        [&](std::span<const std::size_t>, std::span<const double> x, std::span<double> g) {
          g[0] = x[0] - target;
          return 0.5 * g[0] * g[0];
        });
    cocod::CoCoDSGD<decltype(model), cocod::comm::Mpi> opt{
        comm, {.learning_rate = 0.1, .period = 4, .batch_size = 8}};
    opt.optimize(model, cocod::Epochs{20});
    const double expected = 3.0 + (comm.size() - 1) / 2.0;
    if (comm.rank() == 0) {
      std::printf("consensus %.6f over %d ranks (expected %.6f)\n", model.parameters()[0], comm.size(),
                  expected);
      std::printf("model digest: %s\n", cocod::model_digest(model).c_str());
    }
    if (std::abs(model.parameters()[0] - expected) > 1e-3) throw std::runtime_error("wrong consensus");
  });
}
