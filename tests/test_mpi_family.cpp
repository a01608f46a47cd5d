// The family's rules over comm::Mpi (overlap depth included), run by ctest under mpiexec (np 2, 3 and 4): each equals the
// same run over comm::Threads bit for bit, in every progress design (the compressed exchange's
// all-to-all and all-gather included), and the bytes sent per round are what the exchange says.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/comm/mpi.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "support.hpp"

namespace {
using cocod::comm::Mpi;
using Model = cocod_test::LeastSquares<double>;
Mpi* world = nullptr;

Model model_of(int rank) { return Model(50, 13, 500 + static_cast<std::uint64_t>(rank)); }

struct Run {
  std::vector<double> x;
  double bytes = 0;
};

template <template <class...> class Algorithm, class Comm, class... Schedule>
Run run(Comm comm, const cocod_test::Setup& o, const Schedule&... schedule) {
  Model model = model_of(comm.rank());
  auto opt = cocod_test::make<Algorithm<Model, Comm, Schedule...>>(comm, o, schedule...);
  const auto report = opt.optimize(model, cocod::Steps{26});
  return {model.x, report.total(&cocod::RoundStats::bytes_sent)};
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

template <template <class...> class Algorithm, class... Schedule>
void check(const char* name, const cocod_test::Setup& o, const Schedule&... schedule) {
  CAPTURE(name);
  Run threads;
  cocod::comm::Threads::run(world->size(), [&](cocod::comm::Threads t) {
    Run r = run<Algorithm>(t, o, schedule...);
    if (t.rank() == world->rank()) threads = std::move(r);
  });
  for (const auto design : {cocod::comm::MpiProgress::polling_thread, cocod::comm::MpiProgress::blocking_thread,
                            cocod::comm::MpiProgress::caller}) {
    CAPTURE(static_cast<int>(design));
    const Mpi comm(world->handle(), cocod::comm::MpiOptions{.progress = design});
    const Run mpi = run<Algorithm>(comm, o, schedule...);
    CHECK(same_bits(mpi.x, threads.x));
    CHECK(mpi.bytes == threads.bytes);
  }
}

cocod_test::Setup base() {
  return {.options = {.learning_rate = 0.05, .period = 3, .batch_size = 4, .seed = 9}, .sgd = {.momentum = 0.9}, .compress = {.block = 4}};
}
}  // namespace

TEST_CASE("outer optimizers over MPI equal comm::Threads bit for bit") {
  auto o = base();
  o.outer = cocod::Outer::diloco();
  check<cocod::LocalSGD>("local + outer", o);
  check<cocod::Optimizer>("cocod + outer", o);
}

TEST_CASE("Overlap-Local-SGD over MPI equals comm::Threads bit for bit") {
  auto o = base();
  o.pull.anchor_momentum = 0.7;
  check<cocod::OverlapLocalSGD>("overlap", o);
}

TEST_CASE("every compression format over MPI equals comm::Threads bit for bit") {
  for (const auto format : {cocod::Compression::bf16, cocod::Compression::fp16, cocod::Compression::int8}) {
    auto o = base();
    o.compress.format = format;
    check<cocod::LocalSGD>("local", o);
    check<cocod::Optimizer>("cocod", o);
    check<cocod::OverlapLocalSGD>("overlap", o);
    o.outer = cocod::Outer::diloco();
    o.fragments.count = 3;
    check<cocod::Optimizer>("cocod + outer + 3 fragments", o);
  }
}

TEST_CASE("streamed fragments over MPI equal comm::Threads bit for bit") {
  auto o = base();
  o.fragments.count = 4;
  check<cocod::Optimizer>("add-back", o);
  o.fragments.merge = cocod::FragmentMerge::lerp;
  check<cocod::Optimizer>("lerp", o);
}

TEST_CASE("CoCoD-SGD's overlap depth over MPI equals comm::Threads bit for bit (the run ends inside a round)") {
  auto o = base();
  for (const std::size_t tau : {0, 1, 2}) {
    CAPTURE(tau);
    o.depth.steps = tau;
    check<cocod::Optimizer>("cocod, depth tau", o);
  }
  o.outer = cocod::Outer::diloco();
  o.compress.format = cocod::Compression::int8;
  o.fragments.count = 3;
  o.depth.steps = 2;
  check<cocod::Optimizer>("cocod + outer + int8 + 3 fragments, depth 2", o);
  // the automatic depth under a schedule that re-plans every round: whole and partial rounds
  const cocod_test::Scripted schedule{{{3, 0}, {4, 1}, {2, 2}, {3, 2}}};
  o.depth.steps = cocod::OverlapDepth::automatic;
  check<cocod::Optimizer>("cocod + outer + int8 + 3 fragments, automatic depth", o, schedule);
  o = base();
  o.depth.steps = cocod::OverlapDepth::automatic;
  check<cocod::Optimizer>("cocod, automatic depth", o, schedule);
}

TEST_CASE("DiLoCo with delayed outer gradients over MPI equals comm::Threads bit for bit (the run ends inside a round)") {
  for (const auto start : {cocod::OuterStart::eager, cocod::OuterStart::delayed}) {
    CAPTURE(static_cast<int>(start));
    auto o = base();
    o.delay.start = start;
    check<cocod::DelayedDiLoCo>("delayed diloco", o);
    o.compress.format = cocod::Compression::int8;
    o.fragments.count = 3;
    check<cocod::DelayedDiLoCo>("delayed diloco + int8 + 3 fragments", o);
    const cocod_test::Scripted schedule{{{3, 0}, {4, 1}, {2, 2}, {3, 2}}};  // a period that changes every round
    check<cocod::DelayedDiLoCo>("delayed diloco + int8 + 3 fragments, re-planned periods", o, schedule);
  }
}

int main(int argc, char** argv) {
  Mpi comm(argc, argv);
  world = &comm;
  doctest::Context context(argc, argv);
  const int failed = context.run();
  std::vector<double> failures{failed ? 1.0 : 0.0};
  comm.all_reduce(std::span<double>(failures));
  if (comm.rank() == 0) std::printf("test_mpi_family: %d rank(s), %g with failures\n", comm.size(), failures[0]);
  return failures[0] > 0 ? 1 : 0;
}
