// A worker that throws at seeded random steps under comm::Threads: every run ends with the
// worker's exception (no worker left waiting), the next one resumes from the newest
// checkpoint, and after five faults the final model equals the uninterrupted run's bit for bit.
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/checkpoint.hpp>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "../support.hpp"

namespace {
using Model = cocod_test::LeastSquares<double>;
using Schedule = cocod::schedule::Fixed<cocod::lr::Cosine>;
constexpr int workers = 3;
constexpr std::size_t steps = 240;
const cocod::Options options{.learning_rate = 0.05, .period = 4, .batch_size = 4, .seed = 21};
const cocod::update::Sgd sgd{.momentum = 0.9};

/// Throws on worker `rank` when it is about to take step `step`.
struct FaultAt {
  int rank = -1, me = 0;
  std::size_t step = 0;
  void on_begin(const cocod::RunInfo& info) { me = info.rank; }
  void on_step(const cocod::StepInfo& s) {
    if (me == rank && s.step == step) throw std::runtime_error("injected fault at step " + std::to_string(step));
  }
};

/// One run on every worker, resuming from `store` when given; rank 0's model digest.
std::string run(const cocod::Checkpoints* store, FaultAt fault = {}) {
  std::string digest;
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    Model model(50, 8, 40 + static_cast<std::uint64_t>(comm.rank()));
    cocod::Optimizer<Model, cocod::comm::Threads, Schedule> opt{comm, options, sgd};
    if (!store) {
      opt.optimize(model, cocod::Steps{steps});
    } else {
      opt.resume_from(*store);
      cocod::callbacks::Checkpoint save{opt, model, *store, {.rounds = 3}};
      FaultAt mine = fault;  // each worker its own
      opt.optimize(model, cocod::Steps{steps}, mine, save);
    }
    if (comm.rank() == 0) digest = cocod::model_digest(model);
  });
  return digest;
}
}  // namespace

TEST_CASE("a worker that throws: every run ends with its error, and the resumed runs end bit for bit as one run") {
  const std::string whole = run(nullptr);
  const auto dir = std::filesystem::temp_directory_path() / "cocod-test-fault-threads";
  std::filesystem::remove_all(dir);
  const cocod::Checkpoints store(dir);
  cocod::Rng rng(2026);
  for (int fault = 0; fault < 5; ++fault) {
    const auto latest = store.latest();
    const std::size_t from = latest ? latest->step : 0;
    // past the next checkpoint (every 3 rounds of 4 steps), so that each run moves the run on
    FaultAt f{static_cast<int>(rng.below(workers)), 0, from + 13 + static_cast<std::size_t>(rng.below(30))};
    CAPTURE(f.rank);
    CAPTURE(f.step);
    CHECK_THROWS_WITH_AS(run(&store, f), ("injected fault at step " + std::to_string(f.step)).c_str(), std::runtime_error);
    REQUIRE(store.latest().has_value());
    CHECK(store.latest()->step > from);
  }
  CHECK(run(&store) == whole);
}
