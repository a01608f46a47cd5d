// A new communicator: a decorator that counts the collectives and bytes of any communicator it
// wraps. CoCoD-SGD runs over it unchanged, with the same result as over the wrapped one, and
// the counts match what the algorithm sends: one all-reduce of the model (and its control
// slots) per round, plus the final consensus.
#include <cocod.hpp>

#include <atomic>
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include "counting_comm.hpp"


struct Quadratic {  // f(x) = mean_i 0.5 |x - c_i|^2 over this worker's centres c_i
  std::vector<float> x = std::vector<float>(1000, 0.0f);
  int rank = 0;
  std::span<float> parameters() { return x; }
  std::size_t num_samples() const { return 64; }
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<float> g) {
    double loss = 0.0;
    std::fill(g.begin(), g.end(), 0.0f);
    for (auto i : batch) {
      const float c = static_cast<float>(i % 7) + static_cast<float>(rank);
      for (std::size_t d = 0; d < x.size(); ++d) {
        g[d] += (x[d] - c) / static_cast<float>(batch.size());
        loss += 0.5 * (x[d] - c) * (x[d] - c);
      }
    }
    return loss / static_cast<double>(batch.size());
  }
};

int main() {
  const cocod::Options options{.learning_rate = 0.05, .period = 5, .batch_size = 4};
  const std::size_t rounds = 8;
  auto counts = std::make_shared<Counting<cocod::comm::Threads>::Counts>();
  std::vector<float> counted, plain;
  std::size_t n = 0;
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Quadratic model{.rank = comm.rank()};
    n = model.x.size();
    using Comm = Counting<cocod::comm::Threads>;
    cocod::Optimizer<Quadratic, Comm> opt{Comm{comm, counts}, options};
    (void)opt.optimize(model, cocod::Rounds{rounds});
    if (comm.rank() == 0) counted = model.x;
  });
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Quadratic model{.rank = comm.rank()};
    cocod::Optimizer<Quadratic, cocod::comm::Threads> opt{comm, options};
    (void)opt.optimize(model, cocod::Rounds{rounds});
    if (comm.rank() == 0) plain = model.x;
  });
  // Per worker: set-up (one small agreement all-reduce, the broadcast of the model), one
  // all-reduce per round, and the consensus.
  const std::size_t per_worker = counts->collectives / 2;
  std::printf("per worker: %zu collectives, %.1f KiB; per round %.1f KiB for %zu parameters\n", per_worker,
              static_cast<double>(counts->bytes) / 2 / 1024, static_cast<double>(n * sizeof(float)) / 1024, n);
  const bool ok = counted == plain && per_worker == 2 + rounds + 1;
  std::printf("%s\n", ok ? "same model as without the decorator; counts as expected" : "MISMATCH");

  // The byte collectives are forwarded too: an int8-compressed CoCoD-SGD runs over the
  // decorator, with the same model as over comm::Threads alone and fewer bytes.
  const cocod::Compress int8{.format = cocod::Compression::int8};
  auto compressed = std::make_shared<Counting<cocod::comm::Threads>::Counts>();
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Quadratic model{.rank = comm.rank()};
    using Comm = Counting<cocod::comm::Threads>;
    cocod::Optimizer<Quadratic, Comm> opt{Comm{comm, compressed}, options, int8};
    (void)opt.optimize(model, cocod::Rounds{rounds});
    if (comm.rank() == 0) counted = model.x;
  });
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Quadratic model{.rank = comm.rank()};
    cocod::Optimizer<Quadratic, cocod::comm::Threads> opt{comm, options, int8};
    (void)opt.optimize(model, cocod::Rounds{rounds});
    if (comm.rank() == 0) plain = model.x;
  });
  std::printf("int8: per worker %.1f KiB (plain %.1f KiB)\n", static_cast<double>(compressed->bytes) / 2 / 1024,
              static_cast<double>(counts->bytes) / 2 / 1024);
  const bool ok_int8 = counted == plain && compressed->bytes < counts->bytes;
  std::printf("%s\n", ok_int8 ? "same model as without the decorator; fewer bytes" : "MISMATCH");
  return ok && ok_int8 ? 0 : 1;
}
