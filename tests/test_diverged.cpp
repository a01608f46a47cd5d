// A diverged run is reported as such, and bad run lengths or schedules are refused up front.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

namespace {
// f(x) = 0.5 |x|^2 until step `nan_from`, then a NaN loss and gradient (a diverged model).
struct Diverges {
  std::vector<double> x = std::vector<double>(4, 1.0);
  std::size_t nan_from = 6, calls = 0;
  std::span<double> parameters() { return x; }
  std::size_t num_samples() const { return 8; }
  double loss_and_gradient(std::span<const std::size_t>, std::span<double> g) {
    const bool nan = calls++ >= nan_from;
    double loss = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      g[i] = nan ? std::numeric_limits<double>::quiet_NaN() : x[i];
      loss += 0.5 * x[i] * x[i];
    }
    return nan ? std::numeric_limits<double>::quiet_NaN() : loss;
  }
};
// Without the non-finite guard, so that the NaN reaches the report (the guard would raise).
const cocod::Options unguarded{.learning_rate = 0.1, .period = 2, .non_finite = cocod::NonFinite::off};
}  // namespace

TEST_CASE("final_loss reports a NaN consensus instead of the last finite one") {
  Diverges model;
  cocod::LocalSGD<Diverges, cocod::comm::Local> opt{cocod::comm::Local{}, unguarded};
  const auto report = opt.optimize(model, cocod::Steps{12});
  REQUIRE(report.rounds.size() == 6);
  CHECK(std::isfinite(report.rounds[1].consensus_loss));  // before the NaN
  CHECK(std::isnan(report.final_loss()));
  CHECK(std::isnan(model.x[0]));
}

TEST_CASE("final_loss is NaN before any consensus arrived, and the last one after") {
  cocod::Report report;
  CHECK(std::isnan(report.final_loss()));
  cocod::RoundStats r;
  report.rounds.push_back(r);  // no consensus yet (round npos)
  CHECK(std::isnan(report.final_loss()));
  r.consensus_loss = 2.5;
  r.consensus_loss_round = 0;
  report.rounds.push_back(r);
  CHECK(report.final_loss() == 2.5);
}

TEST_CASE_TEMPLATE("final_loss is the last round's consensus loss, which finish() brings", Algorithm,
                   cocod::CoCoDSGD<Diverges, cocod::comm::Threads>, cocod::LocalSGD<Diverges, cocod::comm::Threads>,
                   cocod::SyncSGD<Diverges, cocod::comm::Threads>, cocod::PipeSGD<Diverges, cocod::comm::Threads>,
                   cocod::OverlapLocalSGD<Diverges, cocod::comm::Threads>, cocod::DelayedDiLoCo<Diverges, cocod::comm::Threads>) {
  // One round (the average of CoCoD-SGD and its kin arrives a round late, so no round end
  // carries a consensus loss), a partial last round, and whole rounds.
  for (const std::size_t steps : {3, 4, 5, 8}) {
    CAPTURE(steps);
    std::vector<double> finals(2), last_mean(2);
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
      Diverges model;
      model.nan_from = 1000;
      for (double& v : model.x) v = 1.0 + comm.rank();  // the workers' losses differ
      Algorithm opt{comm, {.learning_rate = 0.1, .period = 4, .batch_size = 2}};
      const auto report = opt.optimize(model, cocod::Steps{steps});
      finals[comm.rank()] = report.final_loss();
      last_mean[comm.rank()] = report.rounds.back().loss;
    });
    CHECK(std::isfinite(finals[0]));
    CHECK(finals[0] == finals[1]);                                         // the consensus, the same on both
    CHECK(finals[0] == doctest::Approx((last_mean[0] + last_mean[1]) / 2));  // of the last round's losses
  }
}

TEST_CASE("EarlyStop counts NaN losses as no progress and stops a diverged run") {
  Diverges model;
  cocod::LocalSGD<Diverges, cocod::comm::Local> opt{cocod::comm::Local{}, unguarded};
  const auto report = opt.optimize(model, cocod::Steps{400}, cocod::callbacks::EarlyStop{{.patience = 3}});
  CHECK(report.stopped_early);
  CHECK(report.steps < 20);  // the NaN starts at step 6; three rounds of no progress later it stops
}

TEST_CASE("a run length beyond what a step count can hold is refused") {
  Diverges model;
  cocod::Optimizer<Diverges, cocod::comm::Local> opt{cocod::comm::Local{}, {}};
  CHECK_THROWS_WITH_AS(opt.optimize(model, cocod::Epochs{1e30}),
                       doctest::Contains("cocod::Epochs: count must give at most 2^53 steps"), std::invalid_argument);
  CHECK(opt.optimize(model, cocod::Steps{2}).steps == 2);  // and the optimizer is still usable
}

TEST_CASE("a cosine schedule with an infinite floor is refused") {
  using Schedule = cocod::schedule::Fixed<cocod::lr::Cosine>;
  CHECK_THROWS_WITH_AS(
      (cocod::Optimizer<Diverges, cocod::comm::Local, Schedule>{
          cocod::comm::Local{}, {}, Schedule{cocod::lr::Cosine{.min_lr = std::numeric_limits<double>::infinity()}}}),
      "cocod::lr::Cosine: min_lr must be finite (got inf)", std::invalid_argument);
}
