// Every invalid hyperparameter throws std::invalid_argument naming the field and the rule.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "support.hpp"

namespace {
using Model = cocod_test::LeastSquares<double>;

std::string message_of(const cocod::Options& o, int workers = 1) {
  try {
    o.validate(workers);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no exception)";
}
std::string message_of(const cocod::update::Sgd& u) {
  try {
    u.validate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no exception)";
}
}  // namespace

TEST_CASE("valid options pass") {
  CHECK_NOTHROW(cocod::Options{}.validate(1));
  CHECK_NOTHROW(cocod::Options{.learning_rate = 0.1, .period = 8, .batch_size = 64, .speeds = {1.0, 2.0, 3.0}}.validate(3));
  CHECK_NOTHROW(cocod::update::Sgd{.momentum = 0.9, .nesterov = true, .weight_decay = 5e-4}.validate());
}

TEST_CASE("each invalid option names its field and rule") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(message_of({.learning_rate = 0}) ==
        "cocod::Options: learning_rate must be a finite number > 0 (got 0)");
  CHECK(message_of({.learning_rate = -0.5}) ==
        "cocod::Options: learning_rate must be a finite number > 0 (got -0.5)");
  CHECK(message_of({.learning_rate = nan}).find("learning_rate must be a finite number > 0") != std::string::npos);
  CHECK(message_of({.learning_rate = inf}).find("learning_rate must be a finite number > 0") != std::string::npos);
  CHECK(message_of(cocod::update::Sgd{.momentum = -0.1}) == "cocod::update::Sgd: momentum must be in [0, 1) (got -0.1)");
  CHECK(message_of(cocod::update::Sgd{.momentum = 1.0}) == "cocod::update::Sgd: momentum must be in [0, 1) (got 1)");
  CHECK(message_of(cocod::update::Sgd{.momentum = 0.0, .nesterov = true}) ==
        "cocod::update::Sgd: nesterov needs momentum > 0 (got nesterov = true, momentum = 0)");
  CHECK(message_of(cocod::update::Sgd{.weight_decay = -1e-4}) ==
        "cocod::update::Sgd: weight_decay must be a finite number >= 0 (got -0.0001)");
  CHECK(message_of({.period = 0}) == "cocod::Options: period must be >= 1 (got 0)");
  CHECK(message_of({.batch_size = 0}) == "cocod::Options: batch_size must be >= 1 (got 0)");
  CHECK(message_of({.speeds = {1.0, 2.0}}, 3) ==
        "cocod::Options: speeds must have one entry per worker (3) (got 2 entries)");
  CHECK(message_of({.speeds = {1.0, 0.0}}, 2) ==
        "cocod::Options: speeds[1] must be a finite number > 0 (got 0)");
  CHECK(message_of({.speeds = {-1.0}}, 1) ==
        "cocod::Options: speeds[0] must be a finite number > 0 (got -1)");
}

TEST_CASE("optimizers validate at construction, against the communicator's size") {
  cocod::comm::Local local;
  CHECK_THROWS_WITH_AS((cocod::Optimizer<Model, cocod::comm::Local>{local, {.learning_rate = -1}}),
                       "cocod::Options: learning_rate must be a finite number > 0 (got -1)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((cocod::SyncSGD<Model, cocod::comm::Local>{local, {.speeds = {1.0, 1.0}}}),
                       "cocod::Options: speeds must have one entry per worker (1) (got 2 entries)",
                       std::invalid_argument);
  CHECK_THROWS_AS((cocod::LocalSGD<Model, cocod::comm::Local>{local, {.period = 0}}), std::invalid_argument);
  CHECK_THROWS_WITH_AS((cocod::PipeSGD<Model, cocod::comm::Local>{local, {}, cocod::update::Sgd{.momentum = 2}}),
                       "cocod::update::Sgd: momentum must be in [0, 1) (got 2)", std::invalid_argument);
}

TEST_CASE("learning-rate schedules validate their fields") {
  using cocod::schedule::Fixed;
  cocod::comm::Local local;
  auto make = [&](auto lr) {
    using S = Fixed<decltype(lr)>;
    return cocod::Optimizer<Model, cocod::comm::Local, S>{local, {}, S{lr}};
  };
  CHECK_THROWS_WITH_AS(make(cocod::lr::StepDecay{.step_size = 0}),
                       "cocod::lr::StepDecay: step_size must be >= 1 (got 0)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(cocod::lr::StepDecay{.gamma = 1.5}),
                       "cocod::lr::StepDecay: gamma must be in (0, 1] (got 1.5)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(cocod::lr::Cosine{.min_lr = -1}),
                       "cocod::lr::Cosine: min_lr must be >= 0 (got -1)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(cocod::lr::Warmup<>{.steps = 0}),
                       "cocod::lr::Warmup: steps must be >= 1 (got 0)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(cocod::lr::Warmup<>{.start_factor = 0}),
                       "cocod::lr::Warmup: start_factor must be in (0, 1] (got 0)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(make(cocod::lr::Warmup<cocod::lr::StepDecay>{.after = {.gamma = 0}}),
                       "cocod::lr::StepDecay: gamma must be in (0, 1] (got 0)", std::invalid_argument);
}

TEST_CASE("links, thread groups and stop conditions validate too") {
  CHECK_THROWS_WITH_AS((cocod::comm::Throttled<cocod::comm::Local>{{}, {.latency = -1}}),
                       "cocod::comm::Link: latency must be a finite number >= 0 seconds (got -1)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((cocod::comm::Throttled<cocod::comm::Local>{{}, {.bandwidth = 0}}),
                       "cocod::comm::Link: bandwidth must be > 0 bytes per second (got 0)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(cocod::comm::Threads::run(0, [](cocod::comm::Threads) {}),
                       "cocod::comm::Threads::run: workers must be >= 1 (got 0)", std::invalid_argument);
  Model model(16, 3, 1);
  cocod::Optimizer<Model, cocod::comm::Local> opt{cocod::comm::Local{}, {}};
  CHECK_THROWS_WITH_AS(opt.optimize(model, cocod::Epochs{0}),
                       "cocod::Epochs: count must be a finite number > 0 (got 0)", std::invalid_argument);
  cocod::Optimizer<Model, cocod::comm::Local> opt2{cocod::comm::Local{}, {}};
  CHECK_THROWS_WITH_AS(opt2.optimize(model, cocod::Steps{0}), "cocod::Steps: count must be >= 1 (got 0)",
                       std::invalid_argument);
}

TEST_CASE("misuse of the step-level API is reported") {
  Model model(16, 3, 1);
  cocod::Optimizer<Model, cocod::comm::Local> opt{cocod::comm::Local{}, {}};
  std::vector<std::size_t> batch{0, 1};
  CHECK_THROWS_WITH_AS(opt.step(model, batch), "cocod: step() called before begin()", std::logic_error);
  CHECK_THROWS_WITH_AS(opt.finish(model), "cocod: finish() called before begin()", std::logic_error);
  opt.begin(model);
  CHECK_THROWS_WITH_AS(opt.begin(model), "cocod: begin() called twice without finish()", std::logic_error);
}

TEST_CASE("an empty shard is reported, naming the worker that has it, with the same words on every worker") {
  Model model(0, 3, 1);
  cocod::Optimizer<Model, cocod::comm::Local> opt{cocod::comm::Local{}, {}};
  CHECK_THROWS_WITH_AS(opt.begin(model), "cocod: rank 0 has an empty shard (num_samples() == 0); every worker needs samples",
                       cocod::DistributedError);
  for (const std::vector<int>& empty : {std::vector<int>{1}, std::vector<int>{1, 2}}) {
    std::vector<std::string> errors(3);
    cocod::comm::Threads::run(3, [&](cocod::comm::Threads comm) {
      const bool none = std::find(empty.begin(), empty.end(), comm.rank()) != empty.end();
      Model m(none ? 0 : 256, 3, 1);
      cocod::Optimizer<Model, cocod::comm::Threads> o{comm, {}};
      try {
        o.begin(m);
      } catch (const cocod::DistributedError& e) {
        errors[static_cast<std::size_t>(comm.rank())] = e.what();
      }
    });
    const std::string want = empty.size() == 1 ? "cocod: rank 1 has an empty shard (num_samples() == 0); every worker needs samples"
                                               : "cocod: ranks 1, 2 have an empty shard (num_samples() == 0); every worker needs samples";
    CHECK(errors == std::vector<std::string>(3, want));
  }
}

namespace {
/// A model with buffers and a layout fingerprint, both chosen per worker.
struct Described : Model {
  std::vector<double> b;
  std::uint64_t layout = 7;
  Described(std::size_t buffers, std::uint64_t fingerprint) : Model(64, 3, 1), b(buffers, 1.0), layout(fingerprint) {}
  std::span<double> buffers() { return b; }
  std::uint64_t layout_fingerprint() const { return layout; }
};
std::vector<std::string> begin_errors(std::vector<std::size_t> buffers, std::vector<std::uint64_t> layouts) {
  std::vector<std::string> errors(buffers.size());
  cocod::comm::Threads::run(static_cast<int>(buffers.size()), [&](cocod::comm::Threads comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    Described m(buffers[r], layouts[r]);
    cocod::Optimizer<Described, cocod::comm::Threads> o{comm, {}};
    try {
      o.begin(m);
      (void)o.finish(m);
    } catch (const cocod::DistributedError& e) {
      errors[r] = e.what();
    }
  });
  return errors;
}
}  // namespace

TEST_CASE("models that differ between workers are refused at begin() with the same words on every worker, naming the workers") {
  CHECK(begin_errors({4, 4, 4}, {7, 7, 7}) == std::vector<std::string>(3));
  CHECK(begin_errors({4, 5, 4}, {7, 7, 7}) ==
        std::vector<std::string>(3, "cocod: the workers' models have different numbers of buffer elements (buffers()): rank 0 has 4; "
                                    "rank 1 has 5; every worker must build the same model"));
  CHECK(begin_errors({4, 4, 4}, {7, 7, 0x123456789abcdefULL}) ==
        std::vector<std::string>(3, "cocod: the models' layout (layout_fingerprint(): the parameters' names and shapes, the frozen "
                                    "ones' values) differs between workers: rank 0 has 0000000000000007; rank 2 has 0123456789abcdef"));
}
