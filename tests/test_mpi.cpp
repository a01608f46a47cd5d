// comm::Mpi, run by ctest under mpiexec at 1, 2, 3 and 4 ranks: collectives for every progress
// design, bitwise agreement with comm::Threads for every algorithm, and errors on every rank.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/comm/mpi.hpp>

#if COCOD_MPI_BOOST
#include <boost/mpi/communicator.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>
#include <string>
#include <utility>
#include <vector>

#include "support.hpp"

namespace {
using cocod::comm::Mpi;
using cocod::comm::MpiOptions;
using cocod::comm::MpiProgress;

Mpi* world = nullptr;  // the communicator main() made (polling thread, deterministic)

const MpiOptions designs[] = {
    {.progress = MpiProgress::polling_thread},
    {.progress = MpiProgress::blocking_thread},
    {.progress = MpiProgress::caller},
};

Mpi with(const MpiOptions& o) { return Mpi(MPI_COMM_WORLD, o); }

// Ends the job with a message when its scope is not left within `limit`: collectives that MPI
// matched wrongly between ranks never return, and the test must fail, not stall.
class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::seconds limit)
      : thread_([this, what = std::move(what), limit] {
          std::unique_lock lock(mutex_);
          if (cv_.wait_for(lock, limit, [&] { return done_; })) return;
          std::fprintf(stderr, "test_mpi: rank %d: %s did not finish within %d s\n", world_rank(), what.c_str(),
                       static_cast<int>(limit.count()));
          std::fflush(stderr);
          MPI_Abort(MPI_COMM_WORLD, 3);
        }) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  static int world_rank() {
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

template <class T>
void check_collectives(Mpi comm) {
  const int N = comm.size(), r = comm.rank();
  for (std::size_t n : {0u, 1u, 3u, 1000u, 100003u}) {
    CAPTURE(n);
    std::vector<T> v(n);
    for (std::size_t j = 0; j < n; ++j) v[j] = static_cast<T>(r + 1) * static_cast<T>(j % 7 + 1);
    comm.all_reduce(std::span<T>(v));
    const T ranks = static_cast<T>(N * (N + 1) / 2);
    bool ok = true;
    for (std::size_t j = 0; j < n; ++j) ok = ok && v[j] == ranks * static_cast<T>(j % 7 + 1);
    CHECK(ok);
    // two in flight at once, waited in reverse order
    std::vector<T> a(n, T(1)), b(n, T(2));
    auto ra = comm.all_reduce_async(std::span<T>(a));
    auto rb = comm.all_reduce_async(std::span<T>(b));
    rb.wait();
    ra.wait();
    for (std::size_t j = 0; j < n; ++j) ok = ok && a[j] == T(N) && b[j] == T(2 * N);
    CHECK(ok);
    std::vector<T> c(n, static_cast<T>(r));
    comm.broadcast(std::span<T>(c), N - 1);
    for (std::size_t j = 0; j < n; ++j) ok = ok && c[j] == static_cast<T>(N - 1);
    CHECK(ok);
  }
}

using Model = cocod_test::LeastSquares<double>;
using History = std::vector<std::vector<double>>;  // the model after each round, then after finish

template <template <class...> class Algorithm, class Comm>
History history(Comm comm, const cocod::Options& o, std::size_t rounds) {
  Model model(60, 9, 300 + static_cast<std::uint64_t>(comm.rank()));
  Algorithm<Model, Comm> opt{comm, o, cocod::update::Sgd{.momentum = 0.9}};
  History h;
  opt.begin(model);
  while (h.size() < rounds) {
    opt.step(model, opt.next_batch());
    if (opt.round_ended()) h.push_back(model.x);
  }
  opt.finish(model);
  h.push_back(model.x);
  return h;
}

template <template <class...> class Algorithm>
void check_same_as_threads(const MpiOptions& design) {
  Mpi comm = with(design);
  const cocod::Options o{.learning_rate = 0.03, .period = 3, .batch_size = 4,
                         .speeds = std::vector<double>(static_cast<std::size_t>(comm.size()), 1.0), .seed = 5};
  auto speeds = o;
  for (int i = 0; i < comm.size(); ++i) speeds.speeds[static_cast<std::size_t>(i)] = 1.0 + i;  // unequal batches
  for (const auto& options : {o, speeds}) {
    const History mpi = history<Algorithm>(comm, options, 5);
    History threads;
    cocod::comm::Threads::run(comm.size(), [&](cocod::comm::Threads t) {
      auto h = history<Algorithm>(t, options, 5);
      if (t.rank() == comm.rank()) threads = std::move(h);
    });
    CHECK(mpi == threads);
  }
}
}  // namespace

TEST_CASE("the MPI environment provides MPI_THREAD_MULTIPLE") { CHECK(world->thread_level() == MPI_THREAD_MULTIPLE); }

#if COCOD_MPI_BOOST
TEST_CASE("a communicator from Boost.MPI works as well") {
  boost::mpi::communicator boost_world;
  Mpi comm(boost_world, {});
  CHECK(comm.rank() == boost_world.rank());
  CHECK(comm.size() == boost_world.size());
  check_collectives<double>(comm);
}
#endif

TEST_CASE("invalid MPI options are reported") {
  using us = std::chrono::microseconds;
  CHECK_THROWS_WITH_AS(Mpi(MPI_COMM_WORLD, {.poll_interval = us(5)}),
                       "cocod::comm::MpiOptions: poll_min must be <= poll_interval (got poll_min 20 us, poll_interval 5 us)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(Mpi(MPI_COMM_WORLD, {.poll_min = us(0)}),
                       "cocod::comm::MpiOptions: poll_min must be >= 1 us for MpiProgress::polling_thread, whose "
                       "shortest sleep between two polls it is (0 would poll without pause, taking a core) (got 0 us)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(Mpi(MPI_COMM_WORLD, {.progress = MpiProgress::caller, .poll_min = us(-1)}),
                       "cocod::comm::MpiOptions: poll_min must be >= 0 us (got -1 us)", std::invalid_argument);
  // The designs that do not sleep between polls accept 0.
  for (auto progress : {MpiProgress::blocking_thread, MpiProgress::caller}) {
    CAPTURE(cocod::comm::to_string(progress));
    CHECK_NOTHROW(check_collectives<double>(with({.progress = progress, .poll_min = us(0)})));
  }
}

TEST_CASE("all_reduce and broadcast, float and double, every progress design") {
  for (const auto& d : designs) {
    CAPTURE(cocod::comm::to_string(d.progress));
    check_collectives<float>(with(d));
    check_collectives<double>(with(d));
  }
  MpiOptions native{.deterministic = false};
  check_collectives<double>(with(native));
}

namespace {
// Values whose sums round differently in another order.
template <class T>
std::vector<T> rounding_values(std::size_t n, int rank) {
  std::vector<T> v(n);
  cocod::Rng rng(1000 + static_cast<std::uint64_t>(rank));
  for (auto& x : v) x = static_cast<T>((rng.uniform() - 0.5) * std::pow(10.0, 6.0 * rng.uniform() - 3.0));
  return v;
}
template <class T>
void check_pipelined(Mpi comm) {
  const auto N = static_cast<std::size_t>(comm.size());
  // Slices of several chunks (64 Ki elements each), lengths that do not divide evenly.
  for (std::size_t n : {N * (std::size_t{3} << 16) + 17, std::size_t{(1u << 16) + 5}, std::size_t{5}}) {
    CAPTURE(n);
    std::vector<T> v = rounding_values<T>(n, comm.rank());
    std::vector<T> w = v;
    comm.all_reduce(std::span<T>(v));
    auto request = comm.all_reduce_async(std::span<T>(w));
    request.wait();
    std::vector<T> expected;
    cocod::comm::Threads::run(comm.size(), [&](cocod::comm::Threads t) {
      std::vector<T> mine = rounding_values<T>(n, t.rank());
      t.all_reduce(std::span<T>(mine));
      if (t.rank() == 0) expected = std::move(mine);
    });
    CHECK(v == expected);
    CHECK(w == expected);
  }
}
}  // namespace

TEST_CASE("the rank-ordered all-reduce of many chunks equals comm::Threads' to the bit, every progress design") {
  for (const auto& d : designs) {
    CAPTURE(cocod::comm::to_string(d.progress));
    check_pipelined<float>(with(d));
    check_pipelined<double>(with(d));
  }
  MpiOptions no_timeout{.stall_timeout = std::chrono::milliseconds(0)};  // blocking waits in MPI_Wait
  check_pipelined<float>(with(no_timeout));
}

TEST_CASE("a blocking collective after a posted one completes on every rank, whichever rank runs ahead") {
  // MPI never matches a blocking collective with a non-blocking one. Rank 0 comes late, so the
  // others call the blocking one while the posted all-reduce is still in flight on them; rank 0
  // calls it once its own has completed: every rank must issue the same kind all the same.
  const int N = world->size();
  if (N == 1) return;
  for (const auto& d : designs) {
    for (const bool broadcast : {false, true}) {
      CAPTURE(cocod::comm::to_string(d.progress));
      CAPTURE(broadcast);
      Mpi comm = with(d);
      Watchdog watchdog(std::string("a blocking ") + (broadcast ? "broadcast" : "all_reduce") +
                            " after all_reduce_async (" + cocod::comm::to_string(d.progress) + ")",
                        std::chrono::seconds(30));
      std::vector<double> a(1000, 1.0), b(1000, comm.rank() + 1.0);
      if (comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      auto request = comm.all_reduce_async(std::span<double>(a));
      if (comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (broadcast)
        comm.broadcast(std::span<double>(b), N - 1);
      else
        comm.all_reduce(std::span<double>(b));
      request.wait();
      CHECK(a == std::vector<double>(1000, N));
      CHECK(b == std::vector<double>(1000, broadcast ? N : N * (N + 1) / 2.0));
    }
  }
}

TEST_CASE("every algorithm gives the same iterates on comm::Mpi as on comm::Threads, bit for bit") {
  for (const auto& d : designs) {
    CAPTURE(cocod::comm::to_string(d.progress));
    check_same_as_threads<cocod::Optimizer>(d);
    check_same_as_threads<cocod::SyncSGD>(d);
    check_same_as_threads<cocod::LocalSGD>(d);
    check_same_as_threads<cocod::PipeSGD>(d);
  }
}

TEST_CASE("parameter counts that differ between ranks raise a clear error on every rank") {
  if (world->size() == 1) return;
  cocod_test::LeastSquares<float> model(20, world->rank() == world->size() - 1 ? 6 : 5, 1);
  cocod::Optimizer<decltype(model), Mpi> opt{*world, {}};
  CHECK_THROWS_WITH_AS(opt.begin(model), doctest::Contains("the parameter count differs between workers: rank 0 has 5"),
                       cocod::DistributedError);
  // ... and the communicator is still usable afterwards (nothing is left half-done)
  std::vector<double> v(2, 1.0);
  world->all_reduce(std::span<double>(v));
  CHECK(v[0] == world->size());
}

TEST_CASE("a stop request on one rank stops all ranks at the same step") {
  Model model(64, 5, static_cast<std::uint64_t>(world->rank()));
  cocod::Optimizer<Model, Mpi> opt{*world, {.period = 4, .batch_size = 8}};
  struct StopAt9 {
    bool on_step(const cocod::StepInfo& s) { return s.step >= 9; }
  };
  const auto report = world->rank() == 0 ? opt.optimize(model, cocod::Steps{400}, StopAt9{})
                                         : opt.optimize(model, cocod::Steps{400});
  std::vector<double> steps{static_cast<double>(report.steps)};
  const double mine = steps[0];
  world->all_reduce(std::span<double>(steps));
  CHECK(steps[0] == mine * world->size());
  CHECK(mine == 16);
}

TEST_CASE("an adaptive schedule re-plans the same way on every rank") {
  // Measurements differ between processes; the plan is computed from their sum in the control
  // slots, so every rank applies the same periods, and the batch sizes of each round add up.
  struct Slow : Model {
    using Model::Model;
    int delay_us = 0;
    double loss_and_gradient(std::span<const std::size_t> batch, std::span<double> g) {
      const double loss = Model::loss_and_gradient(batch, g);
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us * static_cast<int>(batch.size())));
      return loss;
    }
  };
  Slow model(256, 5, static_cast<std::uint64_t>(world->rank()));
  const int N = world->size();
  // Delays of milliseconds per step, far above the scheduling jitter of more ranks than cores
  // (MPICH's ranks poll while they wait), so that the slow rank is measured slow.
  model.delay_us = world->rank() == N - 1 ? 600 : 200;
  using S = cocod::schedule::Adaptive<>;
  cocod::Optimizer<Slow, Mpi, S> opt{*world, {.period = 2, .batch_size = 8}, S{.max_period = 6, .first = 2, .every = 3}};
  const auto report = opt.optimize(model, cocod::Steps{120});
  std::vector<double> rounds{static_cast<double>(report.rounds.size())};
  const double mine = rounds[0];
  world->all_reduce(std::span<double>(rounds));
  REQUIRE(rounds[0] == mine * N);
  std::vector<double> batches, periods;
  for (const auto& r : report.rounds) {
    batches.push_back(static_cast<double>(r.batch_size));
    periods.push_back(static_cast<double>(r.period));
  }
  std::vector<double> periods0 = periods;
  world->all_reduce(std::span<double>(batches));
  world->broadcast(std::span<double>(periods0), 0);
  CHECK(periods == periods0);
  for (double b : batches) CHECK(b == 8.0 * N);
  if (N > 1 && world->rank() == N - 1) CHECK(report.rounds.back().batch_size < 8);  // the slow rank: a smaller batch
}

namespace {
// "rank 1" or "ranks 1, 2, 3": the ranks after rank 0.
std::string others(int size) {
  std::string s = size == 2 ? "rank 1" : "ranks 1";
  for (int q = 2; q < size; ++q) s += ", " + std::to_string(q);
  return s;
}
}  // namespace

TEST_CASE("collectives that differ between ranks raise the same DistributedError on every rank") {
  const int N = world->size();
  if (N == 1) return;
  for (const auto& d : designs) {
    for (const bool posted : {false, true}) {
      CAPTURE(cocod::comm::to_string(d.progress));
      CAPTURE(posted);
      Mpi comm = with(d);
      Watchdog watchdog("mismatched collectives", std::chrono::seconds(30));
      std::vector<double> v(comm.rank() == 0 ? 11 : 12, 1.0);
      auto call = [&] {
        if (!posted) return comm.all_reduce(std::span<double>(v));
        auto request = comm.all_reduce_async(std::span<double>(v));
        request.wait();
      };
      const std::string mismatch = "workers called mismatched collectives (rank 0: all_reduce of 11 doubles; " +
                                   others(N) + ": all_reduce of 12 doubles)";
      CHECK_THROWS_WITH_AS(call(), ("cocod::comm::Mpi: " + mismatch).c_str(), cocod::DistributedError);
      // The ranks are out of step: later collectives fail, as under comm::Threads.
      CHECK_THROWS_WITH_AS(call(), ("cocod::comm::Mpi: collective aborted: " + mismatch).c_str(), cocod::Aborted);
    }
    Mpi comm = with(d);
    Watchdog watchdog("broadcasts from different roots", std::chrono::seconds(30));
    std::vector<float> b(4, 1.0f);
    CHECK_THROWS_WITH_AS(comm.broadcast(std::span<float>(b), comm.rank() == 0 ? 0 : 1),
                         ("cocod::comm::Mpi: workers called mismatched collectives (rank 0: broadcast of 4 floats from "
                          "root 0; " + others(N) + ": broadcast of 4 floats from root 1)").c_str(),
                         cocod::DistributedError);
  }
  // Without a stall timeout a blocking collective moves its data by MPI's blocking calls, which
  // MPI never matches with non-blocking ones: the ranks learn it instead of hanging.
  Mpi comm = with({.stall_timeout = std::chrono::seconds(0)});
  Watchdog watchdog("a blocking collective against a posted one", std::chrono::seconds(30));
  std::vector<double> v(5, 1.0);
  auto call = [&] {
    if (comm.rank() == 0) return comm.all_reduce(std::span<double>(v));
    auto request = comm.all_reduce_async(std::span<double>(v));
    request.wait();
  };
  CHECK_THROWS_WITH_AS(call(),
                       ("cocod::comm::Mpi: workers called mismatched collectives (rank 0: all_reduce of 5 doubles by "
                        "MPI's blocking calls; " + others(N) + ": all_reduce of 5 doubles by MPI's non-blocking calls)")
                           .c_str(),
                       cocod::DistributedError);
}

TEST_CASE("a rank whose communicator goes away fails its peers' next collective instead of hanging it") {
  const int N = world->size();
  if (N == 1) return;
  for (const auto& d : designs) {
    CAPTURE(cocod::comm::to_string(d.progress));
    Watchdog watchdog("a collective after a rank left", std::chrono::seconds(30));
    std::optional<Mpi> comm(with(d));
    std::vector<double> v(11, 1.0);
    comm->all_reduce(std::span<double>(v));
    if (comm->rank() == 1) {
      comm.reset();  // reports the mismatch on its stderr
      continue;
    }
    const std::string callers = N == 2 ? "rank 0 calls" : N == 3 ? "ranks 0, 2 call" : "ranks 0, 2, 3 call";
    CHECK_THROWS_WITH_AS(comm->all_reduce(std::span<double>(v)),
                         ("cocod::comm::Mpi: rank 1 returned while " + callers +
                          " all_reduce of 11 doubles (the workers called different sequences of collectives)")
                             .c_str(),
                         cocod::DistributedError);
  }
}

TEST_CASE("optimizers with a different period on one rank raise DistributedError instead of hanging") {
  // Rank 0 takes rounds of 2 steps, the others of 3. Where the optimizer does not notice it, the
  // all-reduces pair up round by round until the others finish their 60 steps and their
  // communicators go away while rank 0 still calls: those ranks learn it as they leave (their
  // stderr, or Mpi::run's error: see test_mpi_abort); rank 0 must raise.
  if (world->size() == 1) return;
  for (const auto& d : designs) {
    CAPTURE(cocod::comm::to_string(d.progress));
    Watchdog watchdog("optimizers with different periods", std::chrono::seconds(60));
    std::vector<double> raised{0.0};
    {
      Mpi comm = with(d);
      Model model(64, 5, static_cast<std::uint64_t>(comm.rank()));
      cocod::Optimizer<Model, Mpi> opt{comm, {.period = comm.rank() == 0 ? std::size_t{2} : std::size_t{3}, .batch_size = 4}};
      try {
        opt.optimize(model, cocod::Steps{60});
      } catch (const cocod::DistributedError&) {  // from the collectives, or the optimizer's own checks
        raised[0] = 1.0;
      }
      if (comm.rank() == 0) CHECK(raised[0] == 1.0);
    }
    world->all_reduce(std::span<double>(raised));
    CHECK(raised[0] >= 1.0);
  }
}

TEST_CASE("a rank late by less than the stall timeout is waited for") {
  if (world->size() == 1) return;
  for (const auto& d : designs) {
    CAPTURE(cocod::comm::to_string(d.progress));
    Mpi comm = with({.progress = d.progress, .stall_timeout = std::chrono::seconds(3)});
    std::vector<double> v(7, 1.0);
    if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto request = comm.all_reduce_async(std::span<double>(v));
    request.wait();
    if (comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    comm.all_reduce(std::span<double>(v));
    CHECK(v == std::vector<double>(7, static_cast<double>(comm.size() * comm.size())));
  }
}

// --- Byte collectives ---------------------------------------------------------------------------

namespace {
static_assert(cocod::comm::ByteCollectives<Mpi>);

std::byte pattern(int from, int to, std::size_t k) {
  return static_cast<std::byte>((from * 37 + to * 11 + static_cast<int>(k) * 3 + 1) & 0xff);
}
// N blocks of b bytes from `rank`: block j, for rank j, holds pattern(rank, j, .).
std::vector<std::byte> blocks_from(int rank, int N, std::size_t b) {
  std::vector<std::byte> v(static_cast<std::size_t>(N) * b);
  for (int j = 0; j < N; ++j)
    for (std::size_t k = 0; k < b; ++k) v[static_cast<std::size_t>(j) * b + k] = pattern(rank, j, k);
  return v;
}
// What `rank` receives from the all-to-all of blocks_from: block q holds pattern(q, rank, .).
std::vector<std::byte> blocks_to(int rank, int N, std::size_t b) {
  std::vector<std::byte> v(static_cast<std::size_t>(N) * b);
  for (int q = 0; q < N; ++q)
    for (std::size_t k = 0; k < b; ++k) v[static_cast<std::size_t>(q) * b + k] = pattern(q, rank, k);
  return v;
}
// The all-gather of every rank's block 0.
std::vector<std::byte> gathered(int N, std::size_t b) { return blocks_to(0, N, b); }

// Polls ready() (which advances the collective under MpiProgress::caller) until it is true.
template <class Request>
bool poll_ready(Request& request) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!request.ready())
    if (std::chrono::steady_clock::now() > deadline) return false;
  return true;
}
}  // namespace

TEST_CASE("all_to_all and all_gather move every block to its rank, every progress design") {
  for (const auto& d : designs) {
    CAPTURE(cocod::comm::to_string(d.progress));
    Mpi comm = with(d);
    Watchdog watchdog(std::string("byte collectives (") + cocod::comm::to_string(d.progress) + ")",
                      std::chrono::seconds(30));
    const int r = comm.rank(), N = comm.size();
    for (std::size_t b : {0u, 1u, 7u, 4096u}) {
      CAPTURE(b);
      const auto send = blocks_from(r, N, b);
      std::vector<std::byte> recv(send.size(), std::byte{0xee});
      comm.all_to_all(send, recv);
      CHECK(recv == blocks_to(r, N, b));
      std::vector<std::byte> recv2(send.size());
      auto request = comm.all_to_all_async(send, recv2);
      CHECK(poll_ready(request));
      request.wait();
      CHECK(recv2 == blocks_to(r, N, b));

      const std::span<const std::byte> mine(send.data(), b);
      std::vector<std::byte> all(send.size());
      comm.all_gather(mine, all);
      CHECK(all == gathered(N, b));
      std::vector<std::byte> all2(send.size());
      auto gather = comm.all_gather_async(mine, all2);
      CHECK(poll_ready(gather));
      gather.wait();
      CHECK(all2 == gathered(N, b));
      std::vector<std::byte> in_place(send.size());  // this rank's block of recv is the one it sends
      std::copy_n(send.begin(), b, in_place.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * b));
      auto own = std::span<const std::byte>(in_place).subspan(static_cast<std::size_t>(r) * b, b);
      comm.all_gather_async(own, in_place).wait();
      CHECK(in_place == gathered(N, b));
      for (int root = 0; root < N; ++root) {  // broadcast of bytes
        std::vector<std::byte> buffer(b, std::byte{0xee}), expected(b);
        for (std::size_t i = 0; i < b; ++i) expected[i] = static_cast<std::byte>((i * 7 + static_cast<std::size_t>(root)) & 0xff);
        if (r == root) buffer = expected;
        comm.broadcast(std::span<std::byte>(buffer), root);
        CHECK(buffer == expected);
      }
    }
    std::vector<std::byte> nine(9), twelve(12);
    const std::string n = std::to_string(N);
    CHECK_THROWS_WITH_AS(comm.all_gather(nine, twelve),
                         ("cocod::comm::Mpi::all_gather: recv must hold " + n + (N == 1 ? " block" : " blocks") +
                          " of send's size (got send 9 bytes, recv 12 bytes, " + n + (N == 1 ? " worker)" : " workers)"))
                             .c_str(),
                         std::invalid_argument);
    CHECK_THROWS_AS((void)comm.all_to_all_async(nine, twelve), std::invalid_argument);
  }
}

TEST_CASE("byte collectives run in posting order with all_reduce_async, whichever rank runs ahead") {
  for (const auto& d : designs) {
    CAPTURE(cocod::comm::to_string(d.progress));
    Mpi comm = with(d);
    Watchdog watchdog(std::string("byte collectives among all-reduces (") + cocod::comm::to_string(d.progress) + ")",
                      std::chrono::seconds(30));
    const int r = comm.rank(), N = comm.size();
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<double> a(1000, 1.0), c(7, 2.0);
    const auto send = blocks_from(r, N, 100);
    std::vector<std::byte> recv(send.size()), all(send.size()), blocking(send.size());
    auto r1 = comm.all_reduce_async(std::span<double>(a));
    auto r2 = comm.all_to_all_async(send, recv);
    auto r3 = comm.all_reduce_async(std::span<double>(c));
    auto r4 = comm.all_gather_async(std::span<const std::byte>(send).first(100), all);
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    comm.all_to_all(send, blocking);  // runs once the four posted ones completed
    CHECK(r4.ready());
    r4.wait();
    r2.wait();
    r3.wait();
    r1.wait();
    CHECK(a == std::vector<double>(1000, N));
    CHECK(c == std::vector<double>(7, 2.0 * N));
    CHECK(recv == blocks_to(r, N, 100));
    CHECK(blocking == blocks_to(r, N, 100));
    CHECK(all == gathered(N, 100));
    CHECK(r1.completed_at() <= r2.completed_at());
    CHECK(r2.completed_at() <= r3.completed_at());
    CHECK(r3.completed_at() <= r4.completed_at());
  }
}

TEST_CASE("ready() is false until every rank posted the collective") {
  const int N = world->size();
  if (N == 1) return;
  for (const auto& d : designs) {
    CAPTURE(cocod::comm::to_string(d.progress));
    Mpi comm = with(d);
    Watchdog watchdog(std::string("ready() behind a gate (") + cocod::comm::to_string(d.progress) + ")",
                      std::chrono::seconds(30));
    const int r = comm.rank();
    const auto send = blocks_from(r, N, 32);
    std::vector<std::byte> recv(send.size());
    CHECK(Mpi::Request{}.ready());
    // Rank 1 posts only once rank 0 has looked at its request: it cannot have completed then.
    constexpr int gate_tag = 0x6a7e;
    char token = 0;
    if (r == 1) MPI_Recv(&token, 1, MPI_CHAR, 0, gate_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    auto request = comm.all_to_all_async(send, recv);
    if (r == 0) {
      CHECK_FALSE(request.ready());
      MPI_Send(&token, 1, MPI_CHAR, 1, gate_tag, MPI_COMM_WORLD);
    }
    CHECK(poll_ready(request));
    request.wait();
    CHECK(request.ready());
    CHECK(recv == blocks_to(r, N, 32));
  }
}

TEST_CASE("byte collectives that differ between ranks raise the same DistributedError on every rank") {
  const int N = world->size();
  if (N == 1) return;
  for (const auto& d : designs) {
    for (const bool posted : {false, true}) {
      for (const bool kinds : {false, true}) {
        CAPTURE(cocod::comm::to_string(d.progress));
        CAPTURE(posted);
        CAPTURE(kinds);
        Mpi comm = with(d);
        Watchdog watchdog("mismatched byte collectives", std::chrono::seconds(30));
        const int r = comm.rank();
        // kinds: rank 0 gathers blocks of 4 bytes while the others exchange them; else rank 0
        // exchanges blocks of 3 bytes and the others of 4.
        const std::size_t b = !kinds && r == 0 ? 3 : 4;
        const auto send = blocks_from(r, N, b);
        std::vector<std::byte> recv(send.size());
        auto call = [&] {
          const bool gather = kinds && r == 0;
          if (!posted) {
            if (gather) return comm.all_gather(std::span<const std::byte>(send).first(b), recv);
            return comm.all_to_all(send, recv);
          }
          auto request = gather ? comm.all_gather_async(std::span<const std::byte>(send).first(b), recv)
                                : comm.all_to_all_async(send, recv);
          request.wait();
        };
        const std::string mismatch =
            std::string("workers called mismatched collectives (rank 0: ") +
            (kinds ? "all_gather of blocks of 4 bytes; " : "all_to_all of blocks of 3 bytes; ") + others(N) +
            ": all_to_all of blocks of 4 bytes)";
        CHECK_THROWS_WITH_AS(call(), ("cocod::comm::Mpi: " + mismatch).c_str(), cocod::DistributedError);
        CHECK_THROWS_WITH_AS(call(), ("cocod::comm::Mpi: collective aborted: " + mismatch).c_str(), cocod::Aborted);
      }
    }
    // A byte collective against an all-reduce.
    Mpi comm = with(d);
    Watchdog watchdog("a byte collective against an all-reduce", std::chrono::seconds(30));
    std::vector<double> v(5, 1.0);
    std::vector<std::byte> one(1), all(static_cast<std::size_t>(N));
    auto call = [&] {
      if (comm.rank() == 0) return comm.all_gather(one, all);
      comm.all_reduce(std::span<double>(v));
    };
    CHECK_THROWS_WITH_AS(call(),
                         ("cocod::comm::Mpi: workers called mismatched collectives (rank 0: all_gather of blocks of 1 "
                          "byte; " + others(N) + ": all_reduce of 5 doubles)")
                             .c_str(),
                         cocod::DistributedError);
  }
  if (world->size() > 1) {  // a broadcast of bytes of other sizes
    Mpi comm = with(designs[0]);
    Watchdog watchdog("broadcasts of bytes of other sizes", std::chrono::seconds(30));
    std::vector<std::byte> buffer(comm.rank() == 0 ? 5 : 6);
    CHECK_THROWS_WITH_AS(comm.broadcast(std::span<std::byte>(buffer), 0),
                         ("cocod::comm::Mpi: workers called mismatched collectives (rank 0: broadcast of 5 bytes from root "
                          "0; " + others(world->size()) + ": broadcast of 6 bytes from root 0)")
                             .c_str(),
                         cocod::DistributedError);
  }
}

TEST_CASE("a rank whose communicator goes away fails its peers' next byte collective instead of hanging it") {
  const int N = world->size();
  if (N == 1) return;
  for (const auto& d : designs) {
    CAPTURE(cocod::comm::to_string(d.progress));
    Watchdog watchdog("a byte collective after a rank left", std::chrono::seconds(30));
    std::optional<Mpi> comm(with(d));
    std::vector<std::byte> one(2), all(2 * static_cast<std::size_t>(N));
    comm->all_gather(one, all);
    if (comm->rank() == 1) {
      comm.reset();  // reports the mismatch on its stderr
      continue;
    }
    const std::string callers = N == 2 ? "rank 0 calls" : N == 3 ? "ranks 0, 2 call" : "ranks 0, 2, 3 call";
    CHECK_THROWS_WITH_AS(comm->all_gather_async(one, all).wait(),
                         ("cocod::comm::Mpi: rank 1 returned while " + callers +
                          " all_gather of blocks of 2 bytes (the workers called different sequences of collectives)")
                             .c_str(),
                         cocod::DistributedError);
  }
}

int main(int argc, char** argv) {
  Mpi comm(argc, argv);
  world = &comm;
  doctest::Context context(argc, argv);
  const int failed = context.run();
  std::vector<double> failures{failed ? 1.0 : 0.0};
  comm.all_reduce(std::span<double>(failures));  // one exit status for the whole job
  if (comm.rank() == 0) std::printf("test_mpi: %d rank(s), %g with failures\n", comm.size(), failures[0]);
  return failures[0] > 0 ? 1 : 0;
}
