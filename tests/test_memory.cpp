// After a run has started, steps and rounds allocate nothing, for every algorithm.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <array>
#include <atomic>
#include <cstdlib>
#include <new>

#include "support.hpp"

namespace {
std::atomic<long> allocations{0};
}

// The replacement pair below is malloc/free underneath, which GCC cannot see across the
// replacement and warns about.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t n) {
  ++allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {
using Model = cocod_test::LeastSquares<float>;

// The counter is process-wide (communication threads count too), so every worker reads it
// between two barriers, where no thread of the group runs anything else.
template <class Comm>
long counted(Comm& comm) {
  std::array<double, 1> none{};
  comm.all_reduce(std::span<double>(none));
  const long n = allocations.load();
  comm.all_reduce(std::span<double>(none));
  return n;
}

template <template <class...> class Algorithm, class Comm, class Schedule = cocod::schedule::Fixed<>>
long allocations_during_steps(Comm comm, Schedule schedule = {}, cocod::trace::Lane* lane = nullptr) {
  Model model(256, 32, 3 + static_cast<std::uint64_t>(comm.rank()));
  Algorithm<Model, Comm, Schedule> opt{comm, {.learning_rate = 0.01, .period = 4, .batch_size = 16}, schedule, cocod::update::Sgd{.momentum = 0.9}};
  opt.trace(lane);
  opt.begin(model, cocod::Steps{200});
  for (int i = 0; i < 8; ++i) opt.step(model, opt.next_batch());  // warm-up: two full rounds
  const long before = counted(comm);
  for (int i = 0; i < 160; ++i) opt.step(model, opt.next_batch());
  const long during = counted(comm) - before;
  opt.finish(model);
  return during;
}

template <class Comm>
void check_all(Comm comm) {
  CHECK(allocations_during_steps<cocod::Optimizer>(comm) == 0);
  CHECK(allocations_during_steps<cocod::SyncSGD>(comm) == 0);
  CHECK(allocations_during_steps<cocod::LocalSGD>(comm) == 0);
  CHECK(allocations_during_steps<cocod::PipeSGD>(comm) == 0);
  // re-planning every 2 rounds (batch sizes and period change) and recording a timeline
  const cocod::schedule::Adaptive<> adaptive{.first = 2, .every = 2};
  cocod::trace::Lane lane;
  CHECK(allocations_during_steps<cocod::Optimizer>(comm, adaptive, &lane) == 0);
  CHECK(allocations_during_steps<cocod::SyncSGD>(comm, adaptive, &lane) == 0);
  CHECK(allocations_during_steps<cocod::LocalSGD>(comm, adaptive, &lane) == 0);
  CHECK(allocations_during_steps<cocod::PipeSGD>(comm, adaptive, &lane) == 0);
  CHECK(lane.events().size() > 4 * 168);
}
}  // namespace

TEST_CASE("no allocation per step or per round on comm::Local") { check_all(cocod::comm::Local{}); }

TEST_CASE("no allocation per step or per round on comm::Threads") {
  cocod::comm::Threads::run(2, [](cocod::comm::Threads comm) { check_all(comm); });
}

TEST_CASE("no allocation per step or per round on a throttled link") {
  cocod::comm::Threads::run(2, [](cocod::comm::Threads comm) {
    check_all(cocod::comm::Throttled<cocod::comm::Threads>{comm, {.latency = 1e-5, .bandwidth = 1e10}});
  });
}

TEST_CASE("the counter sees allocations (the test can fail)") {
  const long before = allocations.load();
  void* p = ::operator new(16);  // a call, not a new-expression: it cannot be elided
  ::operator delete(p);
  CHECK(allocations.load() == before + 1);
}
