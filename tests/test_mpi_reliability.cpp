// Long runs over comm::Mpi, run by ctest under mpiexec (np 2 and 3): for every algorithm a run
// interrupted at the start, the middle and the last round and resumed equals the uninterrupted
// run bit for bit, and equals the same run over comm::Threads; a damaged checkpoint is the same
// error on every rank; a NaN on one rank is the same NonFiniteError on every rank, or skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/checkpoint.hpp>
#include <cocod/comm/mpi.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "support.hpp"
#include "unaware_rule.hpp"

namespace fs = std::filesystem;

namespace {
using cocod::comm::Mpi;
using Model = cocod_test::LeastSquares<double>;
using Schedule = cocod::schedule::Fixed<cocod::lr::Cosine>;
const cocod::Options options{.learning_rate = 0.05, .period = 3, .batch_size = 4, .seed = 3};
const cocod::update::Sgd sgd{.momentum = 0.9};
constexpr std::size_t total_steps = 22;
Mpi* world = nullptr;

Model model_of(int rank) { return Model(40, 6, 700 + static_cast<std::uint64_t>(rank)); }

/// The same directory on every rank (the job's ranks share this machine's file system).
fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("cocod-test-mpi-checkpoint-" + std::to_string(world->size()) + "-" + name);
  std::vector<double> token{0.0};
  if (world->rank() == 0) fs::remove_all(p);
  world->all_reduce(std::span<double>(token));  // nobody uses it before rank 0 cleared it
  return p;
}

struct Run {
  std::vector<double> x, losses;
  std::size_t steps = 0;
};

/// mode 0: the whole run; 1: stop after saving at `round`; 2: resume and finish.
template <template <class...> class Algorithm, class Comm>
Run run(Comm comm, int mode, const cocod::Checkpoints* store = nullptr, std::size_t round = 0) {
  Model model = model_of(comm.rank());
  Algorithm<Model, Comm, Schedule> opt{comm, options, sgd};
  if (mode == 2) {
    for (auto& v : model.x) v = -7.0;
    REQUIRE(opt.resume(model, *store, cocod::Steps{total_steps}));
  } else {
    opt.begin(model, cocod::Steps{total_steps});
  }
  while (opt.steps_taken() < total_steps) {
    if (mode == 1 && opt.steps_taken() == round * options.period) {
      opt.save(model, *store);
      return {};
    }
    opt.step(model, opt.next_batch());
  }
  if (mode == 1) {
    opt.save(model, *store);  // the last full round ended at the last step
    return {};
  }
  const auto report = opt.finish(model);
  Run r{model.x, {}, report.steps};
  for (const auto& s : report.rounds) r.losses.push_back(s.loss);
  return r;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

template <template <class...> class Algorithm>
void check(const char* name) {
  CAPTURE(name);
  const Run whole = run<Algorithm>(*world, 0);
  Run threads;
  cocod::comm::Threads::run(world->size(), [&](cocod::comm::Threads t) {
    auto r = run<Algorithm>(t, 0);
    if (t.rank() == world->rank()) threads = std::move(r);
  });
  CHECK(same_bits(whole.x, threads.x));
  for (const std::size_t round : {std::size_t{0}, std::size_t{3}, std::size_t{7}}) {
    CAPTURE(round);
    const cocod::Checkpoints store(scratch(std::string(name) + "-" + std::to_string(round)));
    (void)run<Algorithm>(*world, 1, &store, round);
    const Run resumed = run<Algorithm>(*world, 2, &store);
    CHECK(same_bits(resumed.x, whole.x));
    CHECK(same_bits(resumed.losses, whole.losses));
    CHECK(resumed.steps == whole.steps);
  }
}
}  // namespace

TEST_CASE("CoCoD-SGD over MPI resumes bit for bit") { check<cocod::Optimizer>("cocod"); }
TEST_CASE("S-SGD over MPI resumes bit for bit") { check<cocod::SyncSGD>("ssgd"); }
TEST_CASE("Local-SGD over MPI resumes bit for bit") { check<cocod::LocalSGD>("local"); }
TEST_CASE("Pipe-SGD over MPI resumes bit for bit") { check<cocod::PipeSGD>("pipe"); }

TEST_CASE("a corrupt worker file is the same error on every rank, and the store is left as it was") {
  const cocod::Checkpoints store(scratch("corrupt"));
  (void)run<cocod::Optimizer>(*world, 1, &store, 2);
  const fs::path victim = store.folder(2) / cocod::Checkpoints::file_name(world->size() - 1);
  std::vector<double> token{0.0};
  if (world->rank() == 0) {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  world->all_reduce(std::span<double>(token));
  Model model = model_of(world->rank());
  cocod::Optimizer<Model, Mpi, Schedule> opt{*world, options, sgd};
  std::string error;
  try {
    (void)opt.resume(model, store, cocod::Steps{total_steps});
  } catch (const cocod::CheckpointError& e) {
    error = e.what();
  }
  CHECK(error.find(victim.string()) != std::string::npos);
  CHECK(error.find("does not match the checksum in its manifest") != std::string::npos);
  CHECK(store.rounds() == std::vector<std::size_t>{2});
}

namespace {
/// NaN loss and gradient on the last rank at its local step 7.
struct Flaky : Model {
  using Model::Model;
  bool bad = false;
  std::size_t calls = 0;
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<double> g) {
    const double loss = Model::loss_and_gradient(batch, g);
    if (!bad || calls++ != 7) return loss;
    g[1] = std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();
  }
};

template <template <class...> class Algorithm>
void check_non_finite(const char* name) {
  CAPTURE(name);
  for (const auto policy : {cocod::NonFinite::raise, cocod::NonFinite::skip}) {
    Flaky model(40, 6, 50 + static_cast<std::uint64_t>(world->rank()));
    model.bad = world->rank() == world->size() - 1;
    auto o = options;
    o.non_finite = policy;
    Algorithm<Flaky, Mpi> opt{*world, o, sgd};
    std::string error;
    std::size_t skipped = 0;
    try {
      skipped = static_cast<std::size_t>(opt.optimize(model, cocod::Steps{30}).total(&cocod::RoundStats::skipped));
    } catch (const cocod::NonFiniteError& e) {
      error = e.what();
    }
    // the same outcome on every rank
    std::vector<double> mine{error.empty() ? 0.0 : 1.0, static_cast<double>(skipped), 0.0};
    for (double v : model.x) mine[2] += std::isfinite(v) ? 0.0 : 1.0;
    auto all = mine;
    world->all_reduce(std::span<double>(all));
    CHECK(all[0] == mine[0] * world->size());
    CHECK(all[2] == 0.0);  // no model holds a NaN
    if (policy == cocod::NonFinite::raise) {
      CHECK(error.find("rank " + std::to_string(world->size() - 1) + " had a non-finite loss at step 7") != std::string::npos);
    } else {
      CHECK(error.empty());
      CHECK(skipped == 1);
    }
  }
}
}  // namespace

TEST_CASE("a NaN on one rank: every rank raises the same error or skips, no model is NaN") {
  check_non_finite<cocod::Optimizer>("cocod");
  check_non_finite<cocod::SyncSGD>("ssgd");
  check_non_finite<cocod::LocalSGD>("local");
  check_non_finite<cocod::PipeSGD>("pipe");
}

TEST_CASE("an algorithm that does not acknowledge a partial result: the same NonFiniteError on every rank") {
  Flaky model(40, 6, 50 + static_cast<std::uint64_t>(world->rank()));
  model.bad = world->rank() == world->size() - 1;
  cocod::Trainer<cocod_test::Unaware, Flaky, Mpi> opt{*world, options, sgd};
  std::string error;
  try {
    opt.optimize(model, cocod::Steps{30});
  } catch (const cocod::NonFiniteError& e) {
    error = e.what();
  }
  if (world->size() == 1) return;  // (alone, every contribution is withheld: no finite consensus)
  CHECK(error.find("rank " + std::to_string(world->size() - 1) + " had a non-finite loss at step 7") != std::string::npos);
  CHECK(error.find("unaware did not acknowledge the partial result") != std::string::npos);
  std::vector<double> mine{static_cast<double>(std::hash<std::string>{}(error) % (std::size_t{1} << 40))}, all = mine;
  world->all_reduce(std::span<double>(all));
  CHECK(all[0] == mine[0] * world->size());  // the same message on every rank
  for (double v : model.x) CHECK(std::isfinite(v));
}

namespace {
/// Rank 1's run `short_steps` long, the others' 10 (k = 4): every rank raises the same
/// DistributedError (checked through a hash of the message summed over the ranks). On a
/// communicator of its own: where the ranks' collectives differ, it is left out of step.
template <template <class...> class Algorithm>
void check_shorter_run(const char* name, std::size_t short_steps) {
  CAPTURE(name);
  CAPTURE(short_steps);
  Mpi own(MPI_COMM_WORLD);
  Model model = model_of(world->rank());
  Algorithm<Model, Mpi> opt{own, {.period = 4, .batch_size = 4}};
  std::string error = "returned";
  try {
    opt.optimize(model, cocod::Steps{world->rank() == 1 ? short_steps : std::size_t{10}});
  } catch (const cocod::DistributedError& e) {
    error = e.what();
  }
  CHECK(error.rfind("cocod", 0) == 0);
  std::vector<double> mine{static_cast<double>(std::hash<std::string>{}(error) % (std::size_t{1} << 40))}, all = mine;
  world->all_reduce(std::span<double>(all));
  CHECK(all[0] == mine[0] * world->size());  // the same message on every rank
}
}  // namespace

TEST_CASE("a rank whose run is shorter fails with the others: the same DistributedError on every rank") {
  if (world->size() < 2) return;
  check_shorter_run<cocod::Optimizer>("cocod", 8);
  check_shorter_run<cocod::LocalSGD>("local", 8);
  check_shorter_run<cocod::SyncSGD>("ssgd", 8);
  check_shorter_run<cocod::SyncSGD>("ssgd", 7);
  check_shorter_run<cocod::PipeSGD>("pipe", 8);
  check_shorter_run<cocod::PipeSGD>("pipe", 9);
  // and a run after them works
  Model model = model_of(world->rank());
  cocod::Optimizer<Model, Mpi> opt{*world, {.period = 4, .batch_size = 4}};
  CHECK(opt.optimize(model, cocod::Steps{8}).steps == 8);
}

TEST_CASE("a period that differs on one rank is an error at begin() under S-SGD and Pipe-SGD") {
  if (world->size() < 2) return;
  const std::string want = "cocod: the period differs between workers: rank 0 has 4; rank 1 has 8" +
                           std::string(world->size() > 2 ? "; rank 2 has 8" : "");
  for (int algo = 0; algo < 2; ++algo) {
    Model model = model_of(world->rank());
    const cocod::Options o{.period = world->rank() == 0 ? std::size_t{4} : std::size_t{8}, .batch_size = 4};
    std::string error;
    try {
      if (algo == 0) cocod::SyncSGD<Model, Mpi>{*world, o}.optimize(model, cocod::Steps{16});
      else cocod::PipeSGD<Model, Mpi>{*world, o}.optimize(model, cocod::Steps{16});
    } catch (const cocod::DistributedError& e) {
      error = e.what();
    }
    CHECK(error == want);
  }
}

int main(int argc, char** argv) {
  Mpi comm(argc, argv);
  world = &comm;
  doctest::Context context(argc, argv);
  const int failed = context.run();
  std::vector<double> failures{failed ? 1.0 : 0.0};
  comm.all_reduce(std::span<double>(failures));
  if (comm.rank() == 0) std::printf("test_mpi_reliability: %d rank(s), %g with failures\n", comm.size(), failures[0]);
  return failures[0] > 0 ? 1 : 0;
}
