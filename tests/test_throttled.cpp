// comm::Throttled: the alpha-beta model of a ring all-reduce, met within 10%, without burning CPU.
#include <doctest/doctest.h>

#include <sys/resource.h>

#include <cocod.hpp>

#include <chrono>
#include <stdexcept>
#include <vector>

namespace {
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

TEST_CASE("the link model is the ring all-reduce cost") {
  const auto link = cocod::comm::Link::gbit(1.0, 50.0);  // 125 MB/s, 50 us
  CHECK(link.bandwidth == doctest::Approx(125e6));
  CHECK(link.latency == doctest::Approx(50e-6));
  CHECK(link.all_reduce_seconds(1 << 20, 1) == 0.0);
  // 2(N-1) alpha + 2(N-1)/N S/beta with N = 4, S = 1 MiB
  CHECK(link.all_reduce_seconds(1 << 20, 4) == doctest::Approx(6 * 50e-6 + 1.5 * 1048576 / 125e6));
  CHECK(link.broadcast_seconds(1000, 3) == doctest::Approx(2 * 50e-6 + 1000 / 125e6));
}

TEST_CASE("throttled collectives take the modelled time (within 10%) and sleep while waiting") {
  const cocod::comm::Link link{.latency = 0.02, .bandwidth = 2e6};  // 20 ms, 2 MB/s
  constexpr std::size_t n = 25000;                                   // 200 kB of doubles
  const double expected = link.all_reduce_seconds(n * sizeof(double), 2);  // 0.04 + 0.1 = 0.14 s
  std::vector<double> blocking(2), async(2), cpu(2), wall(2), back_to_back(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads inner) {
    cocod::comm::Throttled<cocod::comm::Threads> comm{inner, link};
    const auto r = static_cast<std::size_t>(comm.rank());
    std::vector<double> v(n, 1.0), w(n, 1.0);
    auto t = std::chrono::steady_clock::now();
    comm.all_reduce(std::span<double>(v));
    blocking[r] = since(t);
    CHECK(v[0] == 2.0);

    // A long wait: the process's CPU time must stay far below the wall time.
    const double c0 = cpu_seconds();
    t = std::chrono::steady_clock::now();
    auto req = comm.all_reduce_async(std::span<double>(v));
    req.wait();
    async[r] = since(t);
    cpu[r] = cpu_seconds() - c0;
    wall[r] = async[r];

    // Two collectives posted together share the link: the second ends after both costs.
    t = std::chrono::steady_clock::now();
    auto a = comm.all_reduce_async(std::span<double>(v));
    auto b = comm.all_reduce_async(std::span<double>(w));
    a.wait();
    b.wait();
    back_to_back[r] = since(t);
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(blocking[r] == doctest::Approx(expected).epsilon(0.10));
    CHECK(async[r] == doctest::Approx(expected).epsilon(0.10));
    CHECK(back_to_back[r] == doctest::Approx(2 * expected).epsilon(0.10));
    CHECK(blocking[r] >= expected);
  }
  // Both workers together used far less CPU than one worker's wall time.
  CHECK(cpu[0] + cpu[1] < 0.25 * wall[0]);
}

TEST_CASE("a throttled collective that completes early is not waited for again") {
  const cocod::comm::Link link{.latency = 0.01, .bandwidth = 1e9};
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads inner) {
    cocod::comm::Throttled<cocod::comm::Threads> comm{inner, link};
    std::vector<float> v(10, 1.0f);
    auto req = comm.all_reduce_async(std::span<float>(v));
    std::this_thread::sleep_for(std::chrono::milliseconds(40));  // compute longer than the link
    const auto t = std::chrono::steady_clock::now();
    req.wait();
    CHECK(since(t) < 0.01);
    CHECK(v[0] == 2.0f);
  });
}

TEST_CASE("a Link that is not a link is refused, naming the field, the rule and the value") {
  const cocod::comm::Link negative_latency{.latency = -1.0};
  CHECK_THROWS_WITH_AS(negative_latency.validate(),
                       "cocod::comm::Link: latency must be a finite number >= 0 seconds (got -1)", std::invalid_argument);
  const cocod::comm::Link no_bandwidth{.latency = 0.5, .bandwidth = 0.0};
  CHECK_THROWS_WITH_AS(no_bandwidth.validate(), "cocod::comm::Link: bandwidth must be > 0 bytes per second (got 0)",
                       std::invalid_argument);
  const cocod::comm::Link negative_bandwidth{.bandwidth = -2e9};
  CHECK_THROWS_AS(cocod::comm::Throttled<cocod::comm::Local>(cocod::comm::Local{}, negative_bandwidth),
                  std::invalid_argument);
}
