// Callbacks, reports and stopping: hooks detected at compile time, stop requests agreed by all
// workers, per-round timings that add up.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "support.hpp"

namespace {
using Model = cocod_test::LeastSquares<double>;

struct Counter {  // defines only some hooks
  int begins = 0, steps = 0, rounds = 0, ends = 0;
  void on_begin(const cocod::RunInfo&) { ++begins; }
  void on_step(const cocod::StepInfo&) { ++steps; }
  void on_round(const cocod::RoundStats&) { ++rounds; }
  void on_end(const cocod::Report&) { ++ends; }
};
struct OnlyEnd {
  bool seen = false;
  void on_end(const cocod::Report&) { seen = true; }
};
struct StopAtStep {
  std::size_t at;
  bool on_step(const cocod::StepInfo& s) { return s.step >= at; }
};
}  // namespace

TEST_CASE("hooks a callback defines are called, the others are not required") {
  Model model(64, 5, 1);
  cocod::LocalSGD<Model, cocod::comm::Local> opt{cocod::comm::Local{}, {.period = 4, .batch_size = 8}};
  Counter counter;
  OnlyEnd end;
  const auto report = opt.optimize(model, cocod::Steps{18}, counter, end);
  CHECK(counter.begins == 1);
  CHECK(counter.steps == 18);
  CHECK(counter.rounds == 5);  // four full rounds and a partial one
  CHECK(counter.ends == 1);
  CHECK(end.seen);
  CHECK(report.rounds.size() == 5);
  CHECK(report.rounds.back().steps == 2);
  CHECK(report.steps == 18);
  CHECK_FALSE(report.stopped_early);
}

TEST_CASE_TEMPLATE("a stop request on one worker stops all workers at the same step", Algorithm,
                   cocod::Optimizer<Model, cocod::comm::Threads>, cocod::SyncSGD<Model, cocod::comm::Threads>,
                   cocod::LocalSGD<Model, cocod::comm::Threads>, cocod::PipeSGD<Model, cocod::comm::Threads>) {
  std::vector<std::size_t> steps(3);
  std::vector<std::vector<double>> models(3);
  cocod::comm::Threads::run(3, [&](cocod::comm::Threads comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    Model model(64, 5, r);
    Algorithm opt{comm, {.period = 4, .batch_size = 8}};
    // only worker 1 asks, at its step 9 (in round 2)
    const auto report = comm.rank() == 1 ? opt.optimize(model, cocod::Steps{400}, StopAtStep{9})
                                         : opt.optimize(model, cocod::Steps{400});
    steps[r] = report.steps;
    models[r] = model.x;
    CHECK(report.stopped_early);
  });
  CHECK(steps[0] == steps[1]);
  CHECK(steps[1] == steps[2]);
  CHECK(steps[0] % 4 == 0);  // at a round end
  CHECK(steps[0] >= 12);
  CHECK(steps[0] <= 20);
  CHECK(models[0] == models[1]);  // and the consensus is the same everywhere
  CHECK(models[0] == models[2]);
}

TEST_CASE("EarlyStop reads the consensus loss, the same on every worker") {
  std::vector<std::size_t> steps(2);
  std::vector<double> losses(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    Model model(200, 4, 40 + r);
    cocod::Optimizer<Model, cocod::comm::Threads> opt{comm, {.learning_rate = 0.1, .period = 2, .batch_size = 16}};
    const auto report = opt.optimize(model, cocod::Epochs{200}, cocod::callbacks::EarlyStop{{.patience = 3, .min_delta = 1e-3}});
    steps[r] = report.steps;
    losses[r] = report.final_loss();
    CHECK(report.stopped_early);
  });
  CHECK(steps[0] == steps[1]);
  CHECK(losses[0] == losses[1]);
  CHECK(steps[0] < 2500);  // 200 epochs would be 2500 steps
}

TEST_CASE("the consensus loss is the weighted mean of the workers' round losses") {
  std::vector<cocod::Report> reports(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Model model(100, 4, 7 + static_cast<std::uint64_t>(comm.rank()));
    cocod::LocalSGD<Model, cocod::comm::Threads> opt{comm, {.period = 3, .batch_size = 4, .speeds = {1.0, 3.0}}};
    reports[static_cast<std::size_t>(comm.rank())] = opt.optimize(model, cocod::Rounds{5});
  });
  for (std::size_t k = 0; k < 5; ++k) {
    const auto& a = reports[0].rounds[k];
    CHECK(a.consensus_loss_round == k);  // Local-SGD: known at the round's own end
    CHECK(a.consensus_loss == doctest::Approx(0.25 * a.loss + 0.75 * reports[1].rounds[k].loss));
    CHECK(a.consensus_loss == reports[1].rounds[k].consensus_loss);
  }
}

TEST_CASE("CsvLogger writes a header and one row per round; a bad path is named") {
  const std::string path = "cocod_test_log.csv";
  Model model(64, 5, 1);
  cocod::Optimizer<Model, cocod::comm::Local> opt{cocod::comm::Local{}, {.period = 2, .batch_size = 8}};
  opt.optimize(model, cocod::Rounds{6}, cocod::callbacks::CsvLogger{path});
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  REQUIRE(lines.size() == 7);
  CHECK(lines[0].rfind("algorithm,rank,round,first_step,steps,period,batch_size,epoch", 0) == 0);
  CHECK(lines[1].rfind("CoCoD-SGD,0,0,0,2,2,8,", 0) == 0);
  std::remove(path.c_str());

  cocod::Optimizer<Model, cocod::comm::Local> opt2{cocod::comm::Local{}, {}};
  CHECK_THROWS_WITH_AS(opt2.optimize(model, cocod::Rounds{1}, cocod::callbacks::CsvLogger{"/nonexistent/dir/log.csv"}),
                       "cocod::callbacks::CsvLogger: cannot open '/nonexistent/dir/log.csv' for writing",
                       std::runtime_error);
}

TEST_CASE("per-round times: compute plus waiting fits in the round; blocking waits are the communication") {
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads inner) {
    cocod::comm::Throttled<cocod::comm::Threads> comm{inner, {.latency = 0.002, .bandwidth = 1e9}};
    Model model(64, 5, static_cast<std::uint64_t>(inner.rank()));
    cocod::LocalSGD<Model, decltype(comm)> local{comm, {.period = 4, .batch_size = 8}};
    const auto report = local.optimize(model, cocod::Rounds{6});
    for (const auto& r : report.rounds) {
      CHECK(r.compute_s > 0);
      CHECK(r.wait_s >= 0.004);  // 2(N-1) alpha
      CHECK(r.comm_s == doctest::Approx(r.wait_s));
      CHECK(r.compute_s + r.wait_s <= r.round_s * 1.0001);
    }
    cocod::Optimizer<Model, decltype(comm)> cocod_opt{comm, {.period = 4, .batch_size = 8}};
    const auto overlapped = cocod_opt.optimize(model, cocod::Rounds{6});
    for (const auto& r : overlapped.rounds) {
      CHECK(r.comm_s >= 0.004);  // never less than the link's cost
      CHECK(r.wait_s <= r.round_s);
      CHECK(r.compute_s + r.wait_s <= r.round_s * 1.0001);
    }
  });
}

TEST_CASE("the step-level API reports rounds, steps and an agreed stop") {
  Model model(64, 5, 3);
  cocod::LocalSGD<Model, cocod::comm::Local> opt{cocod::comm::Local{}, {.period = 3, .batch_size = 8}};
  opt.begin(model);
  for (int i = 0; i < 3; ++i) opt.step(model, opt.next_batch());
  CHECK(opt.round_ended());
  CHECK(opt.last_round().steps == 3);
  CHECK(opt.steps_taken() == 3);
  opt.request_stop();
  CHECK_FALSE(opt.stop_agreed());  // travels with the next round's average
  for (int i = 0; i < 3; ++i) opt.step(model, opt.next_batch());
  CHECK(opt.stop_agreed());
  CHECK(opt.last_round().round == 1);
  const auto report = opt.finish(model);
  CHECK(report.steps == 6);
  CHECK(report.rounds.size() == 2);
  CHECK(report.stopped_early);  // the caller's loop stopped on the agreed request, as optimize() would
}

TEST_CASE("a run of the step-level API that no stop ended is not stopped early") {
  Model model(64, 5, 3);
  cocod::LocalSGD<Model, cocod::comm::Local> opt{cocod::comm::Local{}, {.period = 3, .batch_size = 8}};
  opt.begin(model);
  for (int i = 0; i < 6; ++i) opt.step(model, opt.next_batch());
  opt.request_stop();  // asked after the last round end: finish() brings it, too late to end the run
  CHECK_FALSE(opt.finish(model).stopped_early);
}

TEST_CASE("Report::total sums a per-round field over the run") {
  cocod::Report r;
  for (double w : {0.5, 0.25, 2.0}) r.rounds.push_back(cocod::RoundStats{.wait_s = w});
  CHECK(r.total(&cocod::RoundStats::wait_s) == 2.75);
  CHECK(cocod::Report{}.total(&cocod::RoundStats::round_s) == 0.0);
}

TEST_CASE("CsvLogger reports a write that fails (a full disk) instead of losing it silently") {
  cocod::callbacks::CsvLogger logger("/dev/full");
  cocod::RunInfo info;
  info.algorithm = "CoCoD-SGD";
  logger.on_begin(info);
  cocod::RoundStats round;
  for (int i = 0; i < 1000; ++i) logger.on_round(round);  // more than a stream buffer holds
  CHECK_THROWS_WITH_AS(logger.on_end(cocod::Report{}),
                       "cocod::callbacks::CsvLogger: writing '/dev/full' failed (is the disk full?)", std::runtime_error);
}

TEST_CASE("events::Printer prints one line per event, rank 0's unless every rank's is asked for") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  cocod::Event e{.kind = cocod::Event::Kind::skipped, .rank = 0, .round = 3, .step = 12, .message = "skipped a reduction"};
  cocod::events::Printer{f}(e);
  e.rank = 1;
  cocod::events::Printer{f}(e);        // not rank 0's: nothing
  cocod::events::Printer{f, true}(e);  // every rank's
  std::rewind(f);
  char text[256] = {};
  const std::size_t n = std::fread(text, 1, sizeof text - 1, f);
  std::fclose(f);
  CHECK(std::string(text, n) == "cocod [rank 0] round 3 (step 12): skipped a reduction\n"
                                "cocod [rank 1] round 3 (step 12): skipped a reduction\n");
}
