// The run's parts as a user meets them: batches outside the shard, workers that disagree on the
// parameter count, and the state each part exposes for saving and restoring.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <atomic>
#include <string>
#include <vector>

#include "support.hpp"

namespace {
using Model = cocod_test::LeastSquares<double>;
}

TEST_CASE("a batch index outside the shard is refused, naming the index and the shard") {
  Model model(16, 3, 1);
  cocod::Optimizer<Model, cocod::comm::Local> opt{cocod::comm::Local{}, {.batch_size = 2}};
  opt.begin(model);
  const std::vector<std::size_t> bad{3, 16};
  CHECK_THROWS_WITH_AS(opt.step(model, bad),
                       "cocod: step(): batch index 16 is outside this worker's shard (rank 0 has 16 samples)",
                       std::out_of_range);
  CHECK(opt.steps_taken() == 0);  // nothing happened
  const std::vector<std::size_t> good{0, 15};
  CHECK_NOTHROW(opt.step(model, good));
  CHECK(opt.steps_taken() == 1);
  (void)opt.finish(model);
}

TEST_CASE("a batch larger than the shard spans passes, each sample once per pass") {
  cocod::BatchSampler sampler(4, 9, 0);
  std::vector<std::size_t> batch(10), counts(4, 0);
  sampler.next(batch);
  for (auto i : batch) ++counts[i];
  for (auto c : counts) CHECK((c == 2 || c == 3));  // two full passes and half of a third
  CHECK(sampler.passes() == 2);
}

TEST_CASE("the parameter-count error names every rank that differs and its count") {
  std::atomic<int> errors{0};
  CHECK_THROWS_AS(cocod::comm::Threads::run(4,
                                            [&](cocod::comm::Threads comm) {
                                              const std::size_t dim = comm.rank() == 1 ? 7 : comm.rank() == 3 ? 6 : 5;
                                              Model model(20, dim, 1);
                                              cocod::LocalSGD<Model, cocod::comm::Threads> opt{comm, {}};
                                              try {
                                                opt.begin(model);
                                              } catch (const cocod::DistributedError& e) {
                                                CHECK(std::string(e.what()) ==
                                                      "cocod: the parameter count differs between workers: rank 0 "
                                                      "has 5; rank 1 has 7; rank 3 has 6");
                                                ++errors;
                                                throw;
                                              }
                                            }),
                  cocod::DistributedError);
  CHECK(errors == 4);
}

TEST_CASE("the sampler's state restores the same batches") {
  cocod::BatchSampler a(10, 3, 1);
  std::vector<std::size_t> batch(4), x(4), y(4);
  a.next(batch);
  a.next(batch);
  const auto saved = a.state();
  a.next(x);
  a.next(x);
  cocod::BatchSampler b(10, 99, 5);  // another seed and rank: the state decides
  b.restore(saved);
  b.next(y);
  b.next(y);
  CHECK(x == y);
  CHECK(a.passes() == b.passes());
}

TEST_CASE("a run's report, stop votes and counters are what the step-level API shows") {
  Model model(32, 3, 2);
  cocod::Optimizer<Model, cocod::comm::Local> opt{cocod::comm::Local{}, {.period = 3, .batch_size = 4}};
  opt.begin(model, cocod::Steps{7});
  CHECK(opt.info().total_steps == 7);
  std::size_t rounds = 0;
  for (int s = 0; s < 7; ++s) {
    (void)opt.step(model, opt.next_batch());
    if (opt.round_ended()) {
      ++rounds;
      CHECK(opt.last_round().steps == 3);
    }
  }
  CHECK(rounds == 2);
  CHECK_FALSE(opt.stop_agreed());
  const auto report = opt.finish(model);
  CHECK(report.steps == 7);
  REQUIRE(report.rounds.size() == 3);  // the last one partial
  CHECK(report.rounds.back().steps == 1);
}

TEST_CASE("the version macros agree with the CMake project's version") {
  CHECK(std::string(COCOD_VERSION_STRING) == COCOD_PROJECT_VERSION);
  CHECK(std::string(cocod::version_string) ==
        std::to_string(cocod::version_major) + "." + std::to_string(cocod::version_minor) + "." +
            std::to_string(cocod::version_patch));
}
