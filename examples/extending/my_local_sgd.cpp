// A new algorithm: Local-SGD written from scratch as a rule of cocod::Trainer, checked bit for
// bit against the built-in cocod::LocalSGD on 4 in-process workers.
#include <cocod.hpp>

#include <cstdio>
#include <span>
#include <vector>

#include "my_local_sgd.hpp"

// A least-squares shard: f(x) = mean_i 0.5 (a_i . x - b_i)^2.
struct Shard {
  std::size_t dim;
  std::vector<double> a, b, x;
  Shard(int rank, std::size_t dim_, std::size_t samples) : dim(dim_), a(dim_ * samples), b(samples), x(dim_, 0.0) {
    cocod::Rng rng(static_cast<std::uint64_t>(rank) + 1);
    for (auto& v : a) v = rng.uniform() - 0.5;
    for (auto& v : b) v = rng.uniform();
  }
  std::span<double> parameters() { return x; }
  std::size_t num_samples() const { return b.size(); }
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<double> g) {
    std::fill(g.begin(), g.end(), 0.0);
    double loss = 0.0;
    for (auto i : batch) {
      double r = -b[i];
      for (std::size_t d = 0; d < dim; ++d) r += a[i * dim + d] * x[d];
      for (std::size_t d = 0; d < dim; ++d) g[d] += r * a[i * dim + d] / static_cast<double>(batch.size());
      loss += 0.5 * r * r;
    }
    return loss / static_cast<double>(batch.size());
  }
};

template <template <class, class, class, class> class Algorithm>
std::vector<double> train() {
  std::vector<double> result;
  cocod::comm::Threads::run(4, [&](cocod::comm::Threads comm) {
    Shard model(comm.rank(), 8, 100);
    Algorithm<Shard, cocod::comm::Threads, cocod::schedule::Fixed<>, cocod::update::Sgd> opt{
        comm, {.learning_rate = 0.1, .period = 4, .batch_size = 8}, cocod::update::Sgd{.momentum = 0.9}};
    auto report = opt.optimize(model, cocod::Steps{50});  // 12 rounds and a partial one
    if (comm.rank() == 0) {
      std::printf("%-12s %zu steps, %zu rounds, loss %.6f\n", report.info.algorithm.c_str(), report.steps,
                  report.rounds.size(), report.final_loss());
      result = model.x;
    }
  });
  return result;
}

int main() {
  const auto mine = train<MyLocal>();
  const auto builtin = train<cocod::LocalSGD>();
  const bool same = mine == builtin;  // bit for bit
  std::printf("my Local-SGD %s the built-in Local-SGD bit for bit\n", same ? "equals" : "DIFFERS FROM");
  return same ? 0 : 1;
}
