// comm::Threads: collectives, determinism, and failures that end the group instead of hanging.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <exception>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "support.hpp"

// A device backend for comm::Threads' staging of device buffers, found by argument-dependent
// lookup on device_span<double> as the real one is: its "device" memory is host memory, and its
// pinned allocation fails when asked to, as cudaMallocHost does when pinned memory runs out.
namespace fake_device {
bool fail_next_allocation = false;
}  // namespace fake_device
namespace cocod::backend {
inline void* host_staging_allocate(device_span<double>, std::size_t bytes) {
  if (std::exchange(fake_device::fail_next_allocation, false)) throw std::bad_alloc();
  return ::operator new(bytes);
}
inline void host_staging_free(device_span<double>, void* p) noexcept { ::operator delete(p); }
inline void copy_to_host(device_span<const double> from, double* to) {
  if (!to) throw std::logic_error("fake device: copy_to_host into a null host buffer");
  std::copy_n(from.data(), from.size(), to);
}
inline void copy_from_host_async(const double* from, device_span<double> to) {
  std::copy_n(from, to.size(), to.data());
}
}  // namespace cocod::backend

TEST_CASE_TEMPLATE("all_reduce sums in rank order and broadcast copies the root", T, float, double) {
  for (int workers : {1, 2, 3, 5}) {
    std::vector<std::vector<T>> out(static_cast<std::size_t>(workers));
    cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
      const int r = comm.rank();
      CHECK(comm.size() == workers);
      std::vector<T> v(13);
      for (std::size_t j = 0; j < v.size(); ++j) v[j] = static_cast<T>(r + 1) * static_cast<T>(j + 1);
      comm.all_reduce(std::span<T>(v));
      auto req = comm.all_reduce_async(std::span<T>(v));  // twice: sums of sums
      req.wait();
      std::vector<T> b(4, static_cast<T>(r));
      comm.broadcast(std::span<T>(b), workers - 1);
      for (T x : b) CHECK(x == static_cast<T>(workers - 1));
      out[static_cast<std::size_t>(r)] = v;
    });
    const T total = static_cast<T>(workers * (workers + 1) / 2);
    for (const auto& v : out)
      for (std::size_t j = 0; j < v.size(); ++j) CHECK(v[j] == total * workers * static_cast<T>(j + 1));
  }
}

TEST_CASE("the sum does not depend on thread timing") {
  // Values whose sum depends on the order of addition in float.
  std::vector<float> first;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> result;
    std::mutex m;
    cocod::comm::Threads::run(4, [&](cocod::comm::Threads comm) {
      std::this_thread::sleep_for(std::chrono::microseconds(37 * ((comm.rank() + trial) % 4)));
      std::vector<float> v(1000);
      cocod::Rng rng(static_cast<std::uint64_t>(comm.rank()));
      for (auto& x : v) x = static_cast<float>((rng.uniform() - 0.5) * std::pow(10.0, rng.below(12)));
      comm.all_reduce(std::span<float>(v));
      std::lock_guard lock(m);
      if (comm.rank() == 2) result = v;
    });
    if (trial == 0)
      first = result;
    else
      CHECK(result == first);
  }
}

TEST_CASE("CoCoD-SGD on Threads gives bitwise identical models over 20 runs") {
  auto run_once = [] {
    std::vector<std::vector<double>> models(3);
    cocod::comm::Threads::run(3, [&](cocod::comm::Threads comm) {
      cocod_test::LeastSquares<double> model(200, 17, 100 + static_cast<std::uint64_t>(comm.rank()));
      cocod::Optimizer<decltype(model), cocod::comm::Threads> opt{
          comm, {.learning_rate = 0.05, .period = 3, .batch_size = 8, .speeds = {1, 2, 3}, .seed = 9}, cocod::update::Sgd{.momentum = 0.9}};
      opt.optimize(model, cocod::Steps{50});
      models[static_cast<std::size_t>(comm.rank())] = model.x;
    });
    return models;
  };
  const auto reference = run_once();
  CHECK(reference[0] == reference[1]);  // the consensus is the same on every worker
  CHECK(reference[0] == reference[2]);
  for (int i = 1; i < 20; ++i) CHECK(run_once() == reference);
}

TEST_CASE("a worker that throws ends the group; its exception is the one rethrown") {
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<int> aborted{0};
  CHECK_THROWS_WITH_AS(cocod::comm::Threads::run(3,
                                                 [&](cocod::comm::Threads comm) {
                                                   std::vector<double> v(8, 1.0);
                                                   comm.all_reduce(std::span<double>(v));
                                                   if (comm.rank() == 1) throw std::runtime_error("worker one broke");
                                                   try {
                                                     comm.all_reduce(std::span<double>(v));  // never completes
                                                   } catch (const cocod::Aborted&) {
                                                     ++aborted;
                                                     throw;
                                                   }
                                                 }),
                       "worker one broke", std::runtime_error);
  CHECK(aborted == 2);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

namespace {
struct WorkerFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
}  // namespace

TEST_CASE("run rethrows the failing worker's error, not the Aborted of the lower ranks it stopped") {
  std::atomic<int> waiting{0}, aborted{0};
  CHECK_THROWS_WITH_AS(cocod::comm::Threads::run(4,
                                                 [&](cocod::comm::Threads comm) {
                                                   if (comm.rank() == 2) {
                                                     while (waiting < 3) std::this_thread::yield();
                                                     throw WorkerFailure("rank 2 broke");
                                                   }
                                                   std::vector<float> v(8, 1.0f);
                                                   ++waiting;
                                                   try {
                                                     comm.all_reduce(std::span<float>(v));  // rank 2 never joins
                                                   } catch (const cocod::Aborted&) {
                                                     ++aborted;
                                                     throw;
                                                   }
                                                 }),
                       "rank 2 broke", WorkerFailure);
  CHECK(aborted == 3);
}

TEST_CASE("the shared worker runner rethrows the originating error even when an Aborted was caught first") {
  // Rank 0 ends with Aborted before rank 2 fails: the order of the failures in time does not
  // decide, the kind does (comm::Nccl, whose aborted calls fail late, relies on it).
  std::atomic<bool> rank0_caught{false};
  std::atomic<int> left{0};
  std::vector<std::string> reasons;
  std::mutex m;
  CHECK_THROWS_WITH_AS(cocod::comm::detail::run_workers(
                           3,
                           [&](int r) {
                             if (r == 0) throw cocod::Aborted("collective aborted");
                             if (r == 2) {
                               while (!rank0_caught) std::this_thread::yield();
                               throw WorkerFailure("rank 2 broke");
                             }
                           },
                           [&](const std::string& reason) {
                             std::lock_guard lock(m);
                             reasons.push_back(reason);
                             if (reason == "worker 0 stopped") rank0_caught = true;
                           },
                           [&](int) { ++left; }),
                       "rank 2 broke", WorkerFailure);
  CHECK(left == 3);
  REQUIRE(reasons.size() == 2);
  CHECK(reasons[0] == "worker 0 stopped");
  CHECK(reasons[1] == "worker 2 failed: rank 2 broke");
}

TEST_CASE("when every worker ended with Aborted, run rethrows the lowest rank's") {
  CHECK_THROWS_WITH_AS(cocod::comm::detail::run_workers(
                           3, [](int r) { throw cocod::Aborted("stopped " + std::to_string(r)); },
                           [](const std::string&) {}, [](int) {}),
                       "stopped 0", cocod::Aborted);
}

TEST_CASE("mismatched collectives raise the same error on every worker") {
  std::atomic<int> errors{0};
  CHECK_THROWS_AS(cocod::comm::Threads::run(2,
                                            [&](cocod::comm::Threads comm) {
                                              std::vector<double> v(comm.rank() == 0 ? 4 : 5, 1.0);
                                              try {
                                                comm.all_reduce(std::span<double>(v));
                                              } catch (const cocod::DistributedError& e) {
                                                CHECK(std::string(e.what()).find("mismatched collectives") != std::string::npos);
                                                ++errors;
                                                throw;
                                              }
                                            }),
                  cocod::DistributedError);
  CHECK(errors == 2);
}

TEST_CASE("a worker that returns while another waits in a collective does not hang it") {
  CHECK_THROWS_WITH_AS(cocod::comm::Threads::run(2,
                                                 [&](cocod::comm::Threads comm) {
                                                   if (comm.rank() == 0) return;
                                                   std::vector<float> v(3);
                                                   comm.all_reduce(std::span<float>(v));
                                                 }),
                       doctest::Contains("worker 0 returned while this worker waits in a collective"),
                       cocod::DistributedError);
}

TEST_CASE("parameter counts that differ between workers raise a clear error on every worker") {
  std::atomic<int> errors{0};
  CHECK_THROWS_AS(cocod::comm::Threads::run(3,
                                            [&](cocod::comm::Threads comm) {
                                              cocod_test::LeastSquares<float> model(20, comm.rank() == 2 ? 6 : 5, 1);
                                              cocod::Optimizer<decltype(model), cocod::comm::Threads> opt{comm, {}};
                                              try {
                                                opt.begin(model);
                                              } catch (const cocod::DistributedError& e) {
                                                CHECK(std::string(e.what()).find("parameter count differs between workers: rank 0 has 5") != std::string::npos);
                                                ++errors;
                                                throw;
                                              }
                                            }),
                  cocod::DistributedError);
  CHECK(errors == 3);
}

TEST_CASE("a request destroyed without wait() waits for its collective, so the buffer is never written late") {
  std::vector<std::vector<double>> seen(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    std::vector<double> v(4, 1.0 + comm.rank());
    if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 is ahead
    {
      auto request = comm.all_reduce_async(std::span<double>(v));
      (void)request;  // dropped: its destructor waits
    }
    seen[static_cast<std::size_t>(comm.rank())] = v;  // the sum is there, on both workers
  });
  CHECK(seen[0] == std::vector<double>(4, 3.0));
  CHECK(seen[1] == std::vector<double>(4, 3.0));
}

TEST_CASE("a request replaced by another waits for its own collective first") {
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    std::vector<float> a(3, 1.0f), b(3, 2.0f);
    if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto request = comm.all_reduce_async(std::span<float>(a));
    request = comm.all_reduce_async(std::span<float>(b));  // a's collective completes here
    CHECK(a == std::vector<float>(3, 2.0f));
    request.wait();
    CHECK(b == std::vector<float>(3, 4.0f));
  });
}

TEST_CASE("mismatched collectives stop the group: a later collective fails at once, naming the mismatch") {
  // Worker 0 broadcasts one double while worker 1 posts two all-reduces of 6: the first pair
  // mismatches, and worker 1's second collective must not wait to pair with whatever worker 0
  // calls next. Under ThreadSanitizer this also checks that no worker overwrites its posted
  // collective while another still reads it to describe the mismatch.
  std::atomic<int> mismatches{0};
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    if (comm.rank() == 0) {
      std::vector<double> b(1, 1.0);
      try {
        comm.broadcast(std::span<double>(b), 0);
      } catch (const cocod::DistributedError& e) {
        CHECK(std::string(e.what()).find("(worker 0: broadcast of 1 doubles from root 0; worker 1: all_reduce of 6 "
                                         "doubles)") != std::string::npos);
        ++mismatches;
      }
      return;
    }
    std::vector<double> x(6, 1.0), y(6, 1.0);
    auto first = comm.all_reduce_async(std::span<double>(x));
    auto second = comm.all_reduce_async(std::span<double>(y));
    try {
      first.wait();
    } catch (const cocod::DistributedError&) {
      ++mismatches;
    }
    CHECK_THROWS_WITH_AS(second.wait(), doctest::Contains("collective aborted: workers called mismatched collectives"),
                         cocod::Aborted);
  });
  CHECK(mismatches == 2);
}

TEST_CASE("a ticket ring reports a failed ticket as failed even after its slot was reused") {
  cocod::comm::detail::TicketRing<int, 4> ring;
  auto complete = [&](std::exception_ptr error) {
    (void)ring.push(0);
    ring.retire(error);
  };
  complete(nullptr);                                                        // ticket 0
  complete(std::make_exception_ptr(std::runtime_error("ticket 1 failed")));  // ticket 1
  for (int t = 2; t < 10; ++t) complete(nullptr);                            // tickets 2..9: 0..5 are reused
  CHECK_NOTHROW((void)ring.result(0));  // before the first failure: it succeeded
  CHECK_THROWS_WITH_AS((void)ring.result(1), "ticket 1 failed", std::runtime_error);
  // Forgotten outcomes after a failure count as failed: never report success that may be false.
  for (std::uint64_t t = 2; t < 6; ++t) CHECK_THROWS_WITH_AS((void)ring.result(t), "ticket 1 failed", std::runtime_error);
  for (std::uint64_t t = 6; t < 10; ++t) CHECK_NOTHROW((void)ring.result(t));  // still held: their own outcome
}

TEST_CASE("a failed collective's request still fails when waited after a full ring of later ones") {
  std::atomic<int> failures{0};
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    std::vector<double> v(comm.rank() == 0 ? 4 : 5, 1.0);
    auto mismatched = comm.all_reduce_async(std::span<double>(v));
    std::vector<double> w(3, 1.0);
    for (std::size_t i = 0; i < cocod::comm::detail::TicketRing<cocod::comm::detail::Job>::capacity; ++i) {
      auto later = comm.all_reduce_async(std::span<double>(w));
      try {
        later.wait();
      } catch (const cocod::Aborted&) {  // the group is stopped by the mismatch
      }
    }
    try {
      mismatched.wait();
    } catch (const cocod::DistributedError& e) {
      CHECK(std::string(e.what()).find("mismatched collectives") != std::string::npos);
      ++failures;
    }
  });
  CHECK(failures == 2);
}

TEST_CASE("a failed pinned allocation leaves the staging slot empty, so a later smaller collective allocates anew") {
  cocod::comm::Threads::run(1, [&](cocod::comm::Threads comm) {
    std::vector<double> small(2, 1.5), large(16, 2.0);
    const cocod::device_span<double> s(small.data(), small.size()), l(large.data(), large.size());
    const auto slots = cocod::comm::detail::HostStaging::slots;
    for (std::size_t i = 0; i < slots; ++i) comm.all_reduce(s);  // every slot holds 2 doubles
    fake_device::fail_next_allocation = true;
    CHECK_THROWS_AS(comm.all_reduce(l), std::bad_alloc);  // the next slot gives up its memory, gets none
    for (std::size_t i = 0; i < slots; ++i) comm.all_reduce(s);  // ... and comes round again
    CHECK(small == std::vector<double>(2, 1.5));
    comm.all_reduce(l);
    CHECK(large == std::vector<double>(16, 2.0));
  });
}

namespace {
// Starts threads as std::thread does, except the one numbered `fail_at` (from 0), which fails as
// std::thread fails when the system has no thread left to give.
struct FailingStart {
  int fail_at;
  int started = 0;
  template <class F>
  std::thread operator()(F&& f) {
    if (started++ == fail_at)
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again), "pthread_create");
    return std::thread(std::forward<F>(f));
  }
};
}  // namespace

TEST_CASE("a worker thread that cannot be started stops those started and is reported as std::system_error") {
  std::atomic<bool> stopped{false};
  std::atomic<int> ran{0}, left{0};
  std::vector<std::string> reasons;
  std::mutex m;
  CHECK_THROWS_WITH_AS(cocod::comm::detail::run_workers(
                           4,
                           [&](int) {  // like a collective that waits for every rank until aborted
                             ++ran;
                             while (!stopped) std::this_thread::yield();
                             throw cocod::Aborted("collective aborted");
                           },
                           [&](const std::string& reason) {
                             std::lock_guard lock(m);
                             reasons.push_back(reason);
                             stopped = true;
                           },
                           [&](int) { ++left; }, FailingStart{2}),
                       doctest::Contains("cocod::comm: the thread of worker 2 of 4 could not be started: "),
                       std::system_error);
  CHECK(ran == 2);
  CHECK(left == 4);  // the two started, and the two that never ran
  REQUIRE(!reasons.empty());
  CHECK(reasons[0] == "worker 2 could not be started");
}

TEST_CASE("a communication thread that cannot be started stops those started and is reported as std::system_error") {
  for (int fail_at : {0, 2}) {
    CAPTURE(fail_at);
    const std::string expected = "cocod::comm::Threads: the communication thread of worker " +
                                 std::to_string(fail_at) + " of 3 could not be started: ";
    CHECK_THROWS_WITH_AS(cocod::comm::detail::Group(3, FailingStart{fail_at}), doctest::Contains(expected.c_str()),
                         std::system_error);
  }
}

// --- Byte collectives ---------------------------------------------------------------------------

namespace {
// The byte that rank `from` puts at position k of its block for rank `to`.
std::byte pattern(int from, int to, std::size_t k) {
  return static_cast<std::byte>((from * 37 + to * 11 + static_cast<int>(k) * 3 + 1) & 0xff);
}
// N blocks of b bytes: block j holds pattern(rank, j, .).
std::vector<std::byte> blocks_from(int rank, int N, std::size_t b) {
  std::vector<std::byte> v(static_cast<std::size_t>(N) * b);
  for (int j = 0; j < N; ++j)
    for (std::size_t k = 0; k < b; ++k) v[static_cast<std::size_t>(j) * b + k] = pattern(rank, j, k);
  return v;
}
// What rank `rank` receives from an all-to-all: block q holds pattern(q, rank, .).
std::vector<std::byte> blocks_to(int rank, int N, std::size_t b) {
  std::vector<std::byte> v(static_cast<std::size_t>(N) * b);
  for (int q = 0; q < N; ++q)
    for (std::size_t k = 0; k < b; ++k) v[static_cast<std::size_t>(q) * b + k] = pattern(q, rank, k);
  return v;
}
// What every rank receives from an all-gather of each rank's block for rank 0.
std::vector<std::byte> gathered(int N, std::size_t b) {
  std::vector<std::byte> v(static_cast<std::size_t>(N) * b);
  for (int q = 0; q < N; ++q)
    for (std::size_t k = 0; k < b; ++k) v[static_cast<std::size_t>(q) * b + k] = pattern(q, 0, k);
  return v;
}
}  // namespace

TEST_CASE("all_to_all and all_gather move every block to its rank, blocking and posted") {
  static_assert(cocod::comm::ByteCollectives<cocod::comm::Threads>);
  for (int workers : {1, 2, 3, 4}) {
    CAPTURE(workers);
    cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
      const int r = comm.rank(), N = comm.size();
      for (std::size_t b : {0u, 1u, 5u, 1000u}) {
        CAPTURE(b);
        const auto send = blocks_from(r, N, b);
        std::vector<std::byte> recv(send.size(), std::byte{0xee});
        comm.all_to_all(send, recv);
        CHECK(recv == blocks_to(r, N, b));
        std::vector<std::byte> recv2(send.size());
        auto request = comm.all_to_all_async(send, recv2);
        request.wait();
        CHECK(request.ready());
        CHECK(recv2 == blocks_to(r, N, b));

        const std::span<const std::byte> mine(send.data(), b);  // block 0: pattern(r, 0, .)
        std::vector<std::byte> all(send.size());
        comm.all_gather(mine, all);
        CHECK(all == gathered(N, b));
        std::vector<std::byte> all2(send.size());
        auto gather = comm.all_gather_async(mine, all2);
        gather.wait();
        CHECK(all2 == gathered(N, b));
        // In place: this rank's block of recv is the one it sends.
        std::vector<std::byte> in_place(send.size());
        std::copy_n(send.begin(), b, in_place.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * b));
        comm.all_gather(std::span<const std::byte>(in_place).subspan(static_cast<std::size_t>(r) * b, b), in_place);
        CHECK(in_place == gathered(N, b));
      }
    });
  }
}

TEST_CASE("broadcast of bytes gives every worker root's bytes; sizes that differ raise DistributedError on every worker") {
  for (int workers : {1, 2, 3}) {
    CAPTURE(workers);
    cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
      for (int root = 0; root < comm.size(); ++root)
        for (std::size_t b : {0u, 1u, 7u, 1001u}) {
          CAPTURE(root);
          CAPTURE(b);
          std::vector<std::byte> buffer(b, std::byte{0xee}), expected(b);
          for (std::size_t i = 0; i < b; ++i) expected[i] = static_cast<std::byte>((i * 7 + static_cast<std::size_t>(root)) & 0xff);
          if (comm.rank() == root) buffer = expected;
          comm.broadcast(std::span<std::byte>(buffer), root);
          CHECK(buffer == expected);
        }
      std::vector<std::byte> one(1);
      CHECK_THROWS_WITH_AS(comm.broadcast(std::span<std::byte>(one), comm.size()),
                           ("cocod::comm::Threads::broadcast: root " + std::to_string(comm.size()) + " is not a rank of " +
                            std::to_string(comm.size()) + " workers").c_str(),
                           std::invalid_argument);
    });
  }
  std::atomic<int> errors{0};
  CHECK_THROWS_AS(cocod::comm::Threads::run(2,
                                            [&](cocod::comm::Threads comm) {
                                              std::vector<std::byte> buffer(comm.rank() == 0 ? 5 : 6);
                                              try {
                                                comm.broadcast(std::span<std::byte>(buffer), 0);
                                              } catch (const cocod::DistributedError& e) {
                                                if (comm.rank() == 0)
                                                  CHECK(std::string(e.what()).find(
                                                            "(worker 0: broadcast of 5 bytes from root 0; worker 1: "
                                                            "broadcast of 6 bytes from root 0)") != std::string::npos);
                                                ++errors;
                                                throw;
                                              }
                                            }),
                  cocod::DistributedError);
  CHECK(errors == 2);
}

TEST_CASE("byte collectives run in posting order with all_reduce_async") {
  for (int workers : {2, 3, 4}) {
    CAPTURE(workers);
    cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
      const int r = comm.rank(), N = comm.size();
      if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the others run ahead
      std::vector<double> a(100, 1.0), c(7, 2.0);
      const auto send = blocks_from(r, N, 64);
      std::vector<std::byte> recv(send.size()), all(send.size());
      auto r1 = comm.all_reduce_async(std::span<double>(a));
      auto r2 = comm.all_to_all_async(send, recv);
      auto r3 = comm.all_reduce_async(std::span<double>(c));
      auto r4 = comm.all_gather_async(std::span<const std::byte>(send).first(64), all);
      std::vector<std::byte> blocking(send.size());
      comm.all_to_all(send, blocking);  // after the four posted ones
      CHECK(r4.ready());
      r4.wait();
      r3.wait();
      r2.wait();
      r1.wait();
      CHECK(a == std::vector<double>(100, N));
      CHECK(c == std::vector<double>(7, 2.0 * N));
      CHECK(recv == blocks_to(r, N, 64));
      CHECK(blocking == blocks_to(r, N, 64));
      CHECK(all == gathered(N, 64));
      CHECK(r1.completed_at() <= r2.completed_at());
      CHECK(r2.completed_at() <= r3.completed_at());
      CHECK(r3.completed_at() <= r4.completed_at());
    });
  }
}

TEST_CASE("ready() is false until every worker posted the collective, then true without wait()") {
  for (int workers : {2, 3, 4}) {
    for (const bool gather : {false, true}) {
      CAPTURE(workers);
      CAPTURE(gather);
      std::atomic<bool> checked{false};
      cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
        const int r = comm.rank(), N = comm.size();
        const auto send = blocks_from(r, N, 16);
        std::vector<std::byte> recv(send.size());
        auto post = [&] {
          return gather ? comm.all_gather_async(std::span<const std::byte>(send).first(16), recv)
                        : comm.all_to_all_async(send, recv);
        };
        CHECK(cocod::comm::Threads::Request{}.ready());  // nothing to wait for
        if (r == 1)  // the gate: worker 1 posts only once worker 0 looked
          while (!checked) std::this_thread::yield();
        auto request = post();
        if (r == 0) {
          CHECK_FALSE(request.ready());  // worker 1 has not posted: it cannot have completed
          checked = true;
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!request.ready() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        CHECK(request.ready());
        request.wait();
        CHECK(request.ready());
        CHECK(recv == (gather ? gathered(N, 16) : blocks_to(r, N, 16)));
      });
    }
  }
}

TEST_CASE("byte collectives that differ between workers raise DistributedError on every worker") {
  struct Case {
    const char* what;
    const char* expected;  // worker 0's message, as it describes worker 1's call
  };
  for (const Case& c : {Case{"block sizes", "(worker 0: all_to_all of blocks of 3 bytes; worker 1: all_to_all of "
                                           "blocks of 4 bytes)"},
                        Case{"kinds", "(worker 0: all_gather of blocks of 4 bytes; worker 1: all_to_all of blocks "
                                      "of 4 bytes)"},
                        Case{"bytes and doubles", "(worker 0: all_gather of blocks of 4 bytes; worker 1: all_reduce "
                                                  "of 4 doubles)"}}) {
    for (int workers : {2, 3}) {
      CAPTURE(c.what);
      CAPTURE(workers);
      std::atomic<int> errors{0};
      CHECK_THROWS_AS(
          cocod::comm::Threads::run(workers,
                                    [&](cocod::comm::Threads comm) {
                                      const int r = comm.rank(), N = comm.size();
                                      const std::string what = c.what;
                                      const std::size_t b = what == "block sizes" && r == 0 ? 3 : 4;
                                      const auto send = blocks_from(r, N, b);
                                      std::vector<std::byte> recv(send.size());
                                      std::vector<double> v(4, 1.0);
                                      try {
                                        if (r == 0 && what != "block sizes")
                                          comm.all_gather(std::span<const std::byte>(send).first(b), recv);
                                        else if (what == "bytes and doubles")
                                          comm.all_reduce(std::span<double>(v));
                                        else
                                          comm.all_to_all_async(send, recv).wait();
                                      } catch (const cocod::DistributedError& e) {
                                        const std::string m = e.what();
                                        CHECK(m.find("mismatched collectives") != std::string::npos);
                                        if (r == 0) CHECK(m.find(c.expected) != std::string::npos);
                                        ++errors;
                                        throw;
                                      }
                                    }),
          cocod::DistributedError);
      CHECK(errors == workers);
    }
  }
}

TEST_CASE("a worker that returns while another waits in a byte collective does not hang it") {
  CHECK_THROWS_WITH_AS(cocod::comm::Threads::run(2,
                                                 [&](cocod::comm::Threads comm) {
                                                   if (comm.rank() == 0) return;
                                                   std::vector<std::byte> send(4), recv(4);
                                                   comm.all_to_all_async(send, recv).wait();
                                                 }),
                       doctest::Contains("worker 0 returned while this worker waits in a collective"),
                       cocod::DistributedError);
}

TEST_CASE("byte collectives with bad sizes throw invalid_argument naming the call and both sizes") {
  cocod::comm::Threads::run(3, [&](cocod::comm::Threads comm) {
    std::vector<std::byte> nine(9), ten(10), twelve(12), four(4), eight(8);
    CHECK_THROWS_WITH_AS(comm.all_to_all(nine, twelve),
                         "cocod::comm::Threads::all_to_all: send and recv must have the same size, 3 blocks of equal "
                         "size (got send 9 bytes, recv 12 bytes, 3 workers)",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS((void)comm.all_to_all_async(ten, ten),
                         "cocod::comm::Threads::all_to_all_async: send and recv must have the same size, 3 blocks of "
                         "equal size (got send 10 bytes, recv 10 bytes, 3 workers)",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(comm.all_gather(four, eight),
                         "cocod::comm::Threads::all_gather: recv must hold 3 blocks of send's size (got send 4 bytes, "
                         "recv 8 bytes, 3 workers)",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS((void)comm.all_gather_async(four, nine), doctest::Contains("all_gather_async: recv must hold"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(comm.all_to_all(nine, nine),
                         "cocod::comm::Threads::all_to_all: send and recv overlap (send 9 bytes, recv 9 bytes)",
                         std::invalid_argument);
    const std::span<std::byte> recv(twelve);
    const auto other = (comm.rank() + 1) % 3;
    CHECK_THROWS_WITH_AS(comm.all_gather(recv.subspan(static_cast<std::size_t>(other) * 4, 4), recv),
                         ("cocod::comm::Threads::all_gather: send and recv overlap, and send is not recv's block " +
                          std::to_string(comm.rank()) + " (send 4 bytes, recv 12 bytes)")
                             .c_str(),
                         std::invalid_argument);
    // Nothing was posted: the workers are still in step.
    std::vector<float> v(2, 1.0f);
    comm.all_reduce(std::span<float>(v));
    CHECK(v[0] == 3.0f);
  });
}
