// comm::Throttled: the alpha-beta model of a ring all-reduce, met within 10%, without burning CPU.
#include <doctest/doctest.h>

#include <sys/resource.h>

#include <cocod.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <thread>
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

// --- Byte collectives ---------------------------------------------------------------------------

namespace {
// A communicator without byte collectives: Throttled of it is a Communicator, not ByteCollectives.
struct NoBytes {
  struct Request {
    void wait() {}
    [[nodiscard]] cocod::comm::Clock::time_point completed_at() const { return {}; }
  };
  [[nodiscard]] int rank() const { return 0; }
  [[nodiscard]] int size() const { return 1; }
  template <class S>
  void broadcast(S, int) {}
  template <class S>
  void all_reduce(S) {}
  template <class S>
  Request all_reduce_async(S) {
    return {};
  }
};
static_assert(cocod::comm::Communicator<cocod::comm::Throttled<NoBytes>>);
static_assert(!cocod::comm::ByteCollectives<cocod::comm::Throttled<NoBytes>>);
static_assert(cocod::comm::ByteCollectives<cocod::comm::Throttled<cocod::comm::Threads>>);
static_assert(cocod::comm::ByteCollectives<cocod::comm::Throttled<cocod::comm::Local>>);
static_assert(cocod::comm::ByteCollectives<cocod::comm::Local>);

std::vector<std::byte> numbered(std::size_t n, int salt) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 7 + static_cast<std::size_t>(salt)) & 0xff);
  return v;
}
}  // namespace

TEST_CASE("the link model of all_to_all and all_gather: (n-1) alpha + (n-1) b / beta") {
  const auto link = cocod::comm::Link::gbit(1.0, 50.0);  // 125 MB/s, 50 us
  CHECK(link.all_to_all_seconds(1000, 1) == 0.0);
  CHECK(link.all_gather_seconds(1000, 1) == 0.0);
  CHECK(link.all_to_all_seconds(1000, 4) == doctest::Approx(3 * 50e-6 + 3 * 1000 / 125e6));
  CHECK(link.all_gather_seconds(1 << 20, 2) == doctest::Approx(50e-6 + 1048576 / 125e6));
}

TEST_CASE("throttled byte collectives complete no earlier than the link's cost; ready() is false before") {
  const cocod::comm::Link link{.latency = 0.02, .bandwidth = 2e6};  // 20 ms, 2 MB/s
  constexpr std::size_t b = 40000;                                   // 20 ms a block
  const double cost = link.all_to_all_seconds(b, 3);                 // 2 (0.02 + 0.02) = 0.08 s
  CHECK(link.all_gather_seconds(b, 3) == doctest::Approx(cost));
  cocod::comm::Threads::run(3, [&](cocod::comm::Threads inner) {
    cocod::comm::Throttled<cocod::comm::Threads> comm{inner, link};
    const int r = comm.rank();
    std::vector<std::byte> send(3 * b), recv(3 * b), all(3 * b);
    for (std::size_t j = 0; j < 3; ++j)  // block j, for rank j: 10 r + j
      std::fill_n(send.begin() + static_cast<std::ptrdiff_t>(j * b), b, std::byte(10 * r + j));

    auto t = std::chrono::steady_clock::now();
    auto request = comm.all_to_all_async(send, recv);
    CHECK_FALSE(request.ready());  // the link is busy for 80 ms
    while (!request.ready()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(since(t) >= cost);
    CHECK(since(t) < cost + 0.5);
    request.wait();
    for (std::size_t q = 0; q < 3; ++q) CHECK(recv[q * b + b - 1] == std::byte(10 * q + static_cast<std::size_t>(r)));

    t = std::chrono::steady_clock::now();
    comm.all_gather(std::span<const std::byte>(send).first(b), all);  // blocking
    CHECK(since(t) >= cost);
    for (std::size_t q = 0; q < 3; ++q) CHECK(all[q * b] == std::byte(10 * q));

    // The same link as the all-reduces: posted together, the second ends after both costs.
    std::vector<double> v(100, 1.0);
    const double both = link.all_reduce_seconds(v.size() * sizeof(double), 3) + cost;
    t = std::chrono::steady_clock::now();
    auto reduce = comm.all_reduce_async(std::span<double>(v));
    auto gather = comm.all_gather_async(std::span<const std::byte>(send).first(b), all);
    gather.wait();
    CHECK(since(t) >= both);
    reduce.wait();
    CHECK(v[0] == 3.0);

    // The inner collective is done long before the deadline: ready() waits for the deadline.
    const cocod::comm::Link slow{.latency = 0.3};
    cocod::comm::Throttled<cocod::comm::Threads> slow_comm{inner, slow};
    std::vector<std::byte> one(3), three(9);
    auto late = slow_comm.all_gather_async(std::span<const std::byte>(one), three);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_FALSE(late.ready());
    late.wait();
    CHECK(late.ready());
  });
}

TEST_CASE("throttled byte collectives check sizes under their own name") {
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads inner) {
    cocod::comm::Throttled<cocod::comm::Threads> comm{inner, cocod::comm::Link{.latency = 0.001}};
    std::vector<std::byte> three(3), four(4), eight(8);
    CHECK_THROWS_WITH_AS(comm.all_to_all(three, three),
                         "cocod::comm::Throttled::all_to_all: send and recv must have the same size, 2 blocks of equal "
                         "size (got send 3 bytes, recv 3 bytes, 2 workers)",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS((void)comm.all_gather_async(four, four),
                         "cocod::comm::Throttled::all_gather_async: recv must hold 2 blocks of send's size (got send 4 "
                         "bytes, recv 4 bytes, 2 workers)",
                         std::invalid_argument);
    comm.all_gather(four, eight);  // still in step
  });
}

TEST_CASE("comm::Local: the byte collectives copy send to recv and complete at once") {
  cocod::comm::Local local;
  const auto send = numbered(10, 3);
  std::vector<std::byte> recv(10), all(10);
  local.all_to_all(send, recv);
  CHECK(recv == send);
  auto request = local.all_gather_async(send, all);
  CHECK(request.ready());
  request.wait();
  CHECK(all == send);
  std::vector<std::byte> again(10);
  CHECK(local.all_to_all_async(send, again).ready());
  CHECK(again == send);
  auto in_place = numbered(6, 1);
  local.all_gather(in_place, in_place);  // send is recv's block 0
  CHECK(in_place == numbered(6, 1));
  std::vector<std::byte> empty;
  local.all_to_all(empty, empty);
  CHECK_THROWS_WITH_AS(local.all_to_all(send, std::span<std::byte>(all).first(4)),
                       "cocod::comm::Local::all_to_all: send and recv must have the same size, 1 block (got send 10 "
                       "bytes, recv 4 bytes, 1 worker)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(local.all_gather(send, std::span<std::byte>(all).first(4)),
                       "cocod::comm::Local::all_gather: recv must hold 1 block of send's size (got send 10 bytes, recv 4 "
                       "bytes, 1 worker)",
                       std::invalid_argument);
  // Throttled<Local>: forwarded; one worker costs nothing.
  cocod::comm::Throttled<cocod::comm::Local> throttled{local, cocod::comm::Link{.latency = 1.0}};
  std::vector<std::byte> out(10);
  auto t = throttled.all_to_all_async(send, out);
  CHECK(t.ready());
  t.wait();
  CHECK(out == send);
}
