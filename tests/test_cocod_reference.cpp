// An independent, step-by-step recomputation of the multi-worker algorithms, written plainly here
// (element loops, no library kernels), must match the library's workers to the bit.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <optional>
#include <type_traits>
#include <vector>

#include "support.hpp"

namespace {
using T = double;
using Model = cocod_test::LeastSquares<T>;
using Models = std::vector<std::vector<T>>;

Model make(int rank) { return Model(90, 7, 900 + static_cast<std::uint64_t>(rank)); }

/// The plain simulation: N workers in one thread, each updating with a copy of `rule` (plain SGD
/// from the setup's update::Sgd by default). Returns each worker's model after every round and,
/// last, after finish.
enum class Algo { cocod, local, sync };
template <class Rule = cocod_test::PlainSgd<T>>
std::vector<Models> simulate(Algo algo, int n, const cocod_test::Setup& setup, std::size_t rounds,
                             std::optional<Rule> rule = std::nullopt) {
  const cocod::Options& o = setup.options;
  const auto N = static_cast<std::size_t>(n);
  std::vector<Model> models;
  std::vector<Rule> sgd;
  std::vector<cocod::BatchSampler> samplers;
  std::vector<std::size_t> M(N);
  double total = 0;
  for (int i = 0; i < n; ++i) total += o.speeds[static_cast<std::size_t>(i)];
  for (std::size_t i = 0; i < N; ++i) {
    models.push_back(make(static_cast<int>(i)));
    if constexpr (std::is_same_v<Rule, cocod_test::PlainSgd<T>>)
      sgd.push_back(rule.value_or(Rule{static_cast<T>(setup.sgd.momentum), static_cast<T>(setup.sgd.weight_decay),
                                       setup.sgd.nesterov, {}}));
    else
      sgd.push_back(rule.value());
    samplers.emplace_back(models[i].num_samples(), o.seed, static_cast<int>(i));
    M[i] = static_cast<std::size_t>(std::round(static_cast<double>(N * o.batch_size) * o.speeds[i] / total));
  }
  std::vector<T> w(N);
  double Msum = 0;
  for (auto m : M) Msum += static_cast<double>(m);
  for (std::size_t i = 0; i < N; ++i) w[i] = static_cast<T>(static_cast<double>(M[i]) / Msum);
  const std::size_t d = models[0].x.size();
  for (std::size_t i = 1; i < N; ++i) models[i].x = models[0].x;  // broadcast from rank 0

  auto weighted_sum = [&](const Models& v) {  // sum_i w_i v_i, added in rank order
    std::vector<T> s(d);
    for (std::size_t j = 0; j < d; ++j) {
      T acc = w[0] * v[0][j];
      for (std::size_t i = 1; i < N; ++i) acc = acc + w[i] * v[i][j];
      s[j] = acc;
    }
    return s;
  };
  Models anchors(N);
  for (std::size_t i = 0; i < N; ++i) anchors[i] = models[i].x;
  std::vector<Models> history;
  std::vector<T> g(d);
  for (std::size_t round = 0; round < rounds; ++round) {
    const std::vector<T> xbar = weighted_sum(anchors);  // CoCoD: the average posted at round start
    for (std::size_t step = 0; step < o.period; ++step) {
      Models grads(N);
      for (std::size_t i = 0; i < N; ++i) {
        std::vector<std::size_t> batch(M[i]);
        samplers[i].next(batch);
        models[i].loss_and_gradient(batch, g);
        grads[i] = g;
      }
      if (algo == Algo::sync) {
        const auto gbar = weighted_sum(grads);
        for (std::size_t i = 0; i < N; ++i) sgd[i].apply(models[i].x, gbar, static_cast<T>(o.learning_rate));
      } else {
        for (std::size_t i = 0; i < N; ++i) sgd[i].apply(models[i].x, grads[i], static_cast<T>(o.learning_rate));
      }
    }
    if (algo == Algo::cocod) {
      for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t j = 0; j < d; ++j) models[i].x[j] = models[i].x[j] + (xbar[j] - anchors[i][j]);
        anchors[i] = models[i].x;
      }
    } else if (algo == Algo::local) {
      Models xs(N);
      for (std::size_t i = 0; i < N; ++i) xs[i] = models[i].x;
      const auto avg = weighted_sum(xs);
      for (std::size_t i = 0; i < N; ++i) models[i].x = avg;
    }
    Models snapshot(N);
    for (std::size_t i = 0; i < N; ++i) snapshot[i] = models[i].x;
    history.push_back(snapshot);
  }
  if (algo == Algo::cocod) {  // finish: the consensus
    const auto c = weighted_sum(history.back());
    history.push_back(Models(N, c));
  } else {
    history.push_back(history.back());
  }
  return history;
}

template <template <class...> class Algorithm, class Update = cocod::update::Sgd>
std::vector<Models> run_library(int n, const cocod_test::Setup& s, std::size_t rounds) {
  const auto N = static_cast<std::size_t>(n);
  std::vector<Models> history(rounds + 1, Models(N));
  cocod::comm::Threads::run(n, [&](cocod::comm::Threads comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    Model model = make(comm.rank());
    auto opt = cocod_test::make<Algorithm<Model, cocod::comm::Threads, cocod::schedule::Fixed<>, Update>>(comm, s);
    opt.begin(model);
    std::size_t round = 0;
    while (round < rounds) {
      opt.step(model, opt.next_batch());
      if (opt.round_ended()) history[round++][r] = model.x;
    }
    opt.finish(model);
    history[rounds][r] = model.x;
  });
  return history;
}

void compare(const std::vector<Models>& expected, const std::vector<Models>& actual) {
  REQUIRE(expected.size() == actual.size());
  for (std::size_t round = 0; round < expected.size(); ++round) {
    CAPTURE(round);
    for (std::size_t i = 0; i < expected[round].size(); ++i) {
      CAPTURE(i);
      CHECK(expected[round][i] == actual[round][i]);
    }
  }
}
}  // namespace

TEST_CASE("CoCoD-SGD matches a plain recomputation: 2 workers, momentum") {
  const cocod_test::Setup o{{.learning_rate = 0.03, .period = 3, .batch_size = 5, .speeds = {1.0, 1.0}, .seed = 21},
                            {.momentum = 0.9}};
  const auto expected = simulate(Algo::cocod, 2, o, 6);
  compare(expected, run_library<cocod::Optimizer>(2, o, 6));
  CHECK(expected[2][0] != expected[2][1]);  // the workers' models really differ between rounds
}

TEST_CASE("CoCoD-SGD matches a plain recomputation: 3 workers, unequal batches, Nesterov, weight decay") {
  const cocod_test::Setup o{{.learning_rate = 0.02, .period = 4, .batch_size = 4, .speeds = {1.0, 2.0, 1.5}, .seed = 22},
                            {.momentum = 0.8, .nesterov = true, .weight_decay = 1e-3}};
  compare(simulate(Algo::cocod, 3, o, 5), run_library<cocod::Optimizer>(3, o, 5));
}

TEST_CASE("Local-SGD and S-SGD match their plain recomputations: 3 workers") {
  const cocod_test::Setup o{{.learning_rate = 0.02, .period = 3, .batch_size = 4, .speeds = {3.0, 2.0, 1.0}, .seed = 23},
                            {.momentum = 0.5}};
  compare(simulate(Algo::local, 3, o, 4), run_library<cocod::LocalSGD>(3, o, 4));
  compare(simulate(Algo::sync, 3, o, 4), run_library<cocod::SyncSGD>(3, o, 4));
}

TEST_CASE("with Adam and AdamW, CoCoD-SGD, Local-SGD and S-SGD match a plain recomputation: 3 workers, unequal batches") {
  cocod_test::Setup o{{.learning_rate = 0.01, .period = 3, .batch_size = 4, .speeds = {1.0, 2.0, 1.5}, .seed = 24}};
  o.adamw = {.beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.05};
  o.adam = {.weight_decay = 1e-3};
  const auto adamw = cocod_test::PlainAdam<T>::of(o.adamw);
  const auto adam = cocod_test::PlainAdam<T>::of(o.adam);
  const auto expected = simulate(Algo::cocod, 3, o, 5, std::optional(adamw));
  compare(expected, run_library<cocod::Optimizer, cocod::update::AdamW>(3, o, 5));
  CHECK(expected[2][0] != expected[2][1]);
  compare(simulate(Algo::local, 3, o, 4, std::optional(adamw)), run_library<cocod::LocalSGD, cocod::update::AdamW>(3, o, 4));
  compare(simulate(Algo::sync, 3, o, 4, std::optional(adamw)), run_library<cocod::SyncSGD, cocod::update::AdamW>(3, o, 4));
  compare(simulate(Algo::cocod, 3, o, 5, std::optional(adam)), run_library<cocod::Optimizer, cocod::update::Adam>(3, o, 5));
  o.adamw.weight_decay = 0;  // no decay: no `x * 1` in the step
  compare(simulate(Algo::local, 3, o, 4, std::optional(cocod_test::PlainAdam<T>::of(o.adamw))),
          run_library<cocod::LocalSGD, cocod::update::AdamW>(3, o, 4));
}
