// With one worker, CoCoD-SGD, S-SGD and Local-SGD are plain serial SGD to the bit, and Pipe-SGD
// is serial SGD with a one-step-stale gradient, for every local update rule.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <vector>

#include "support.hpp"

namespace {
template <class T>
using Model = cocod_test::LeastSquares<T>;

struct Case {
  const char* name;
  cocod_test::Setup options;
};
const Case cases[] = {
    {"sgd", {{.learning_rate = 0.05, .period = 4, .batch_size = 7, .seed = 3}}},
    {"momentum", {{.learning_rate = 0.02, .period = 3, .batch_size = 5, .seed = 4}, {.momentum = 0.9}}},
    {"nesterov+wd", {{.learning_rate = 0.02, .period = 5, .batch_size = 6, .seed = 5}, {.momentum = 0.8, .nesterov = true, .weight_decay = 1e-2}}},
    {"wd", {{.learning_rate = 0.03, .period = 1, .batch_size = 4, .seed = 6}, {.weight_decay = 1e-3}}},
};
constexpr std::size_t steps = 37;  // not a multiple of any period: ends in a partial round

/// Serial SGD written out plainly; `stale` applies each gradient one step late (Pipe-SGD).
template <class T>
std::vector<T> serial(const cocod_test::Setup& setup, bool stale, double (*lr)(double, std::size_t)) {
  const cocod::Options& o = setup.options;
  Model<T> model(150, 11, 77);
  cocod_test::PlainSgd<T> sgd{static_cast<T>(setup.sgd.momentum), static_cast<T>(setup.sgd.weight_decay), setup.sgd.nesterov, {}};
  cocod::BatchSampler sampler(model.num_samples(), o.seed, 0);
  std::vector<std::size_t> batch(o.batch_size);
  std::vector<T> g(model.x.size()), previous;
  T previous_lr{};
  for (std::size_t t = 0; t < steps; ++t) {
    sampler.next(batch);
    model.loss_and_gradient(batch, g);
    const T rate = static_cast<T>(lr(o.learning_rate, t));
    if (!stale) {
      sgd.apply(model.x, g, rate);
      continue;
    }
    if (!previous.empty()) sgd.apply(model.x, previous, previous_lr);
    previous = g;
    previous_lr = rate;
  }
  if (stale) sgd.apply(model.x, previous, previous_lr);
  return model.x;
}

template <template <class...> class Algorithm, class T, class Comm, class Schedule = cocod::schedule::Fixed<>>
std::vector<T> library(Comm comm, const cocod_test::Setup& o, Schedule schedule = {}) {
  Model<T> model(150, 11, 77);
  auto opt = cocod_test::make<Algorithm<Model<T>, Comm, Schedule>>(comm, o, schedule);
  opt.optimize(model, cocod::Steps{steps});
  return model.x;
}

double constant(double base, std::size_t) { return base; }
double cosine(double base, std::size_t t) { return cocod::lr::Cosine{.total_steps = 30, .min_lr = 0.001}(base, t, 0); }

template <class T, class Comm>
void check_all(Comm comm) {
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto sgd = serial<T>(c.options, false, constant);
    CHECK(library<cocod::Optimizer, T>(comm, c.options) == sgd);
    CHECK(library<cocod::SyncSGD, T>(comm, c.options) == sgd);
    CHECK(library<cocod::LocalSGD, T>(comm, c.options) == sgd);
    CHECK(library<cocod::PipeSGD, T>(comm, c.options) == serial<T>(c.options, true, constant));
    // a learning-rate schedule, and the stale gradient keeps the rate of its own step
    using Cos = cocod::schedule::Fixed<cocod::lr::Cosine>;
    const Cos cos{{.total_steps = 30, .min_lr = 0.001}};
    CHECK(library<cocod::Optimizer, T>(comm, c.options, cos) == serial<T>(c.options, false, cosine));
    CHECK(library<cocod::PipeSGD, T>(comm, c.options, cos) == serial<T>(c.options, true, cosine));
  }
}
}  // namespace

TEST_CASE_TEMPLATE("one worker on comm::Local equals serial SGD bit for bit", T, float, double) {
  check_all<T>(cocod::comm::Local{});
}

TEST_CASE_TEMPLATE("one worker on comm::Threads equals serial SGD bit for bit", T, float, double) {
  cocod::comm::Threads::run(1, [](cocod::comm::Threads comm) { check_all<T>(comm); });
}

TEST_CASE("the serial reference is not trivially equal to the start") {
  const auto x = serial<double>(cases[0].options, false, constant);
  CHECK(x != Model<double>(150, 11, 77).x);
  CHECK(x != serial<double>(cases[0].options, true, constant));
}
