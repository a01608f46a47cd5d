// comm::Gloo on loopback: workers as threads of this process (each with its own Gloo context and
// TCP connections, as separate processes would have) and, for a lost peer, as a second process.
// Sums equal comm::Threads' to the bit, every algorithm and family exchange gives the same
// iterates, and every failure ends every worker with a clear error within its timeout.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/comm/gloo.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

extern char** environ;

namespace {
using cocod::comm::Gloo;
using cocod::comm::GlooOptions;
using Clock = std::chrono::steady_clock;

cocod::comm::StoreServer& server() {
  static cocod::comm::StoreServer s("127.0.0.1", 0);
  return s;
}
std::string store_address() { return "127.0.0.1:" + std::to_string(server().port()); }
// Every group of workers under its own keys.
std::string fresh_prefix() {
  static std::atomic<int> n{0};
  return "test" + std::to_string(n++);
}
GlooOptions options_for(int rank, int size, const std::string& prefix) {
  return {.store = store_address(), .rank = rank, .size = size, .prefix = prefix, .hostname = "127.0.0.1",
          .connect_timeout = std::chrono::seconds(20), .stall_timeout = std::chrono::seconds(20)};
}

// fn(comm) on N worker threads, each with its own comm::Gloo; returns each rank's error ("" if none).
std::vector<std::string> run_gloo(int n, const std::function<void(Gloo)>& fn,
                                  const std::function<void(GlooOptions&)>& adjust = {}) {
  const std::string prefix = fresh_prefix();
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        GlooOptions o = options_for(r, n, prefix);
        if (adjust) adjust(o);
        fn(Gloo(o));
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}
void require_no_errors(const std::vector<std::string>& errors) {
  for (const auto& e : errors) REQUIRE(e == "");
}

template <class T>
std::vector<T> data_of(int rank, std::size_t n) {
  std::mt19937 gen(17 + static_cast<unsigned>(rank));
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(gen) * std::pow(10.0, d(gen) * 3));  // sums that depend on the order
  return v;
}
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
void check_sums_equal_threads(int n) {
  for (std::size_t count : {0u, 1u, 3u, 1000u, 100003u}) {
    CAPTURE(n);
    CAPTURE(count);
    std::vector<std::vector<T>> threads(static_cast<std::size_t>(n)), gloo = threads;
    cocod::comm::Threads::run(n, [&](cocod::comm::Threads t) {
      auto v = data_of<T>(t.rank(), count);
      t.all_reduce(std::span<T>(v));
      threads[static_cast<std::size_t>(t.rank())] = v;
    });
    require_no_errors(run_gloo(n, [&](Gloo g) {
      auto v = data_of<T>(g.rank(), count);
      auto w = data_of<T>(g.rank(), count);
      auto c = data_of<T>(g.rank(), count);
      auto first = g.all_reduce_async(std::span<T>(w));  // two in flight, waited in reverse order
      auto second = g.all_reduce_async(std::span<T>(c));
      second.wait();
      first.wait();
      g.all_reduce(std::span<T>(v));
      CHECK((same_bits(v, w) && same_bits(v, c)));
      gloo[static_cast<std::size_t>(g.rank())] = v;
      auto b = data_of<T>(g.rank(), count);
      g.broadcast(std::span<T>(b), g.size() - 1);
      CHECK(same_bits(b, data_of<T>(g.size() - 1, count)));
    }));
    for (int r = 0; r < n; ++r) CHECK(same_bits(gloo[static_cast<std::size_t>(r)], threads[0]));
  }
}

using Model = cocod_test::LeastSquares<double>;

template <template <class...> class Algorithm, class Comm>
std::vector<double> trained(Comm comm, const cocod_test::Setup& s) {
  Model model(50, 13, 500 + static_cast<std::uint64_t>(comm.rank()));
  auto opt = cocod_test::make<Algorithm<Model, Comm>>(comm, s);
  opt.optimize(model, cocod::Steps{26});
  return model.x;
}

template <template <class...> class Algorithm>
void check_same_as_threads(const char* name, const cocod_test::Setup& s, int n = 3) {
  CAPTURE(name);
  std::vector<std::vector<double>> threads(static_cast<std::size_t>(n)), gloo = threads;
  cocod::comm::Threads::run(n, [&](cocod::comm::Threads t) { threads[static_cast<std::size_t>(t.rank())] = trained<Algorithm>(t, s); });
  require_no_errors(run_gloo(n, [&](Gloo g) { gloo[static_cast<std::size_t>(g.rank())] = trained<Algorithm>(g, s); }));
  for (int r = 0; r < n; ++r) CHECK(same_bits(gloo[static_cast<std::size_t>(r)], threads[static_cast<std::size_t>(r)]));
}

cocod_test::Setup base() {
  return {.options = {.learning_rate = 0.05, .period = 3, .batch_size = 4, .seed = 9}, .sgd = {.momentum = 0.9}, .compress = {.block = 4}};
}

std::string self_path;

// Starts this program as a worker of a group (see main): returns its process id.
pid_t spawn_peer(const std::string& mode, const GlooOptions& o) {
  const std::string rank = std::to_string(o.rank), size = std::to_string(o.size);
  std::vector<std::string> args{self_path, "--peer", mode, o.store, rank, size, o.prefix};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, self_path.c_str(), nullptr, nullptr, argv.data(), environ) == 0);
  return pid;
}
}  // namespace

TEST_CASE("all_reduce sums in rank order, bitwise as comm::Threads; broadcast copies the root (1-4 workers)") {
  for (int n = 1; n <= 4; ++n) {
    check_sums_equal_threads<float>(n);
    check_sums_equal_threads<double>(n);
  }
}

TEST_CASE("all_to_all and all_gather move every block to its rank, in posting order with all_reduce_async") {
  require_no_errors(run_gloo(3, [](Gloo g) {
    const int n = g.size(), r = g.rank();
    constexpr std::size_t b = 5;
    std::vector<std::byte> send(n * b), recv(n * b), gathered(n * b);
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < b; ++i) send[q * b + i] = std::byte(static_cast<unsigned char>(16 * r + q + i));
    std::vector<float> x(10, 1.0f);
    auto reduce = g.all_reduce_async(std::span<float>(x));
    auto exchange = g.all_to_all_async(send, recv);
    exchange.wait();
    reduce.wait();
    CHECK(x[9] == 3.0f);
    bool ok = true;
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < b; ++i) ok = ok && recv[q * b + i] == std::byte(static_cast<unsigned char>(16 * q + r + i));
    CHECK(ok);
    g.all_gather(std::span<const std::byte>(send.data(), b), gathered);  // out of place
    for (int q = 0; q < n; ++q) ok = ok && gathered[q * b] == std::byte(static_cast<unsigned char>(16 * q));
    CHECK(ok);
    std::vector<std::byte> in_place(n * b, std::byte{0});
    in_place[r * b] = std::byte{static_cast<unsigned char>(r + 1)};
    g.all_gather_async(std::span<const std::byte>(in_place.data() + r * b, b), in_place).wait();
    for (int q = 0; q < n; ++q) ok = ok && in_place[q * b] == std::byte(static_cast<unsigned char>(q + 1));
    CHECK(ok);
    CHECK_THROWS_AS(g.all_to_all(std::span<const std::byte>(send.data(), 4), std::span<std::byte>(recv.data(), 4)),
                    std::invalid_argument);
  }));
}

TEST_CASE("broadcast of bytes gives every worker root's bytes; sizes that differ raise the same DistributedError") {
  static_assert(cocod::comm::ByteCollectives<Gloo>);
  require_no_errors(run_gloo(3, [](Gloo g) {
    for (int root = 0; root < g.size(); ++root)
      for (std::size_t b : {0u, 1u, 7u, 100001u}) {
        std::vector<std::byte> buffer(b, std::byte{0xee}), expected(b);
        for (std::size_t i = 0; i < b; ++i) expected[i] = static_cast<std::byte>((i * 7 + static_cast<std::size_t>(root)) & 0xff);
        if (g.rank() == root) buffer = expected;
        g.broadcast(std::span<std::byte>(buffer), root);
        CHECK(buffer == expected);
      }
  }));
  const auto errors = run_gloo(3, [](Gloo g) {
    std::vector<std::byte> buffer(g.rank() == 1 ? 6 : 5);
    g.broadcast(std::span<std::byte>(buffer), 0);
  });
  for (const auto& e : errors) {
    CHECK(e == errors[0]);
    CHECK(e.find("cocod::comm::Gloo: workers called mismatched collectives (ranks 0, 2: broadcast of 5 bytes from root 0; "
                 "rank 1: broadcast of 6 bytes from root 0)") != std::string::npos);
  }
}

TEST_CASE("every algorithm gives the same iterates on comm::Gloo as on comm::Threads, bit for bit") {
  const auto s = base();
  check_same_as_threads<cocod::Optimizer>("cocod", s);
  check_same_as_threads<cocod::SyncSGD>("ssgd", s);
  check_same_as_threads<cocod::LocalSGD>("local", s);
  check_same_as_threads<cocod::PipeSGD>("pipe", s);
  check_same_as_threads<cocod::OverlapLocalSGD>("overlap", s);
  check_same_as_threads<cocod::DelayedDiLoCo>("delayed diloco", s);
}

TEST_CASE("the family's exchanges (compression, outer, fragments) on comm::Gloo equal comm::Threads bit for bit") {
  auto s = base();
  s.compress.format = cocod::Compression::int8;
  check_same_as_threads<cocod::Optimizer>("int8", s, 4);
  s.outer = cocod::Outer::diloco();
  s.fragments.count = 3;
  check_same_as_threads<cocod::Optimizer>("int8 + outer + 3 fragments", s, 4);
  s.compress.format = cocod::Compression::fp16;
  check_same_as_threads<cocod::LocalSGD>("local fp16 + outer + 3 fragments", s, 2);
}

TEST_CASE("collectives that differ between workers raise the same DistributedError on every worker") {
  const auto errors = run_gloo(3, [](Gloo g) {
    std::vector<float> a(g.rank() == 1 ? 7 : 6);
    g.all_reduce(std::span<float>(a));
  });
  for (const auto& e : errors) {
    CHECK(e == errors[0]);
    CHECK(e.find("cocod::comm::Gloo: workers called mismatched collectives (ranks 0, 2: all_reduce of 6 floats; rank 1: "
                 "all_reduce of 7 floats)") != std::string::npos);
  }
}

TEST_CASE("a worker that returns while the others call a collective fails them instead of hanging them") {
  // Gloo::run departs when fn returns: the peer's collective sees that and fails on both.
  const std::string prefix = fresh_prefix();
  std::vector<std::string> seen(2);
  std::vector<int> status(2, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      status[static_cast<std::size_t>(r)] = Gloo::run(options_for(r, 2, prefix), [&](Gloo g) {
        try {
          if (g.rank() == 0) {
            std::vector<double> a(4);
            g.all_reduce(std::span<double>(a));
          }
        } catch (const cocod::DistributedError& e) {
          seen[static_cast<std::size_t>(g.rank())] = e.what();
          throw;
        }
      });
    });
  for (auto& t : threads) t.join();
  CHECK(seen[0] == "cocod::comm::Gloo: rank 1 returned while rank 0 calls all_reduce of 4 doubles (the workers called "
                   "different sequences of collectives)");
  CHECK(status == std::vector<int>{1, 1});  // rank 1's departure raises the same error, reported by run
}

TEST_CASE("a worker that fails in Gloo::run ends its peers' collectives with its own error") {
  const std::string prefix = fresh_prefix();
  std::vector<std::string> seen(3);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      Gloo::run(options_for(r, 3, prefix), [&](Gloo g) {
        std::vector<float> a(1000, 1.0f);
        g.all_reduce(std::span<float>(a));
        if (g.rank() == 1) throw std::runtime_error("the data loader failed");
        try {
          g.all_reduce(std::span<float>(a));
        } catch (const cocod::Aborted& e) {
          seen[static_cast<std::size_t>(g.rank())] = e.what();
          throw;
        }
      });
    });
  for (auto& t : threads) t.join();
  CHECK(seen[0] == "cocod::comm::Gloo: rank 1 failed: the data loader failed");
  CHECK(seen[2] == seen[0]);
  CHECK(Clock::now() - start < std::chrono::seconds(10));  // not the stall timeout (20 s)
}

TEST_CASE("a worker that stops calling collectives is given up after the stall timeout") {
  const auto errors = run_gloo(2, [](Gloo g) {
    std::vector<float> a(8);
    if (g.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    g.all_reduce(std::span<float>(a));
  }, [](GlooOptions& o) { o.stall_timeout = std::chrono::milliseconds(500); });
  CHECK(errors[0].find("cocod::comm::Gloo: rank 0: all_reduce of 8 floats made no progress for") != std::string::npos);
  CHECK(errors[0].find("(stall_timeout 500 ms)") != std::string::npos);
  CHECK(errors[1] != "");  // its peer no longer takes part: it fails too, never hangs
}

TEST_CASE("after abort() from another thread, every collective fails at once with PeerLost") {
  const auto errors = run_gloo(2, [](Gloo g) {
    std::vector<float> a(1000, 1.0f);
    g.all_reduce(std::span<float>(a));
    std::thread([g]() mutable { g.abort(); }).join();
    const auto t0 = Clock::now();
    CHECK_THROWS_WITH_AS(g.all_reduce(std::span<float>(a)), doctest::Contains("its group was ended (abort)"), cocod::PeerLost);
    CHECK_THROWS_AS(g.all_reduce(std::span<float>(a)), cocod::PeerLost);
    CHECK(Clock::now() - t0 < std::chrono::seconds(1));
  });
  CHECK(errors == std::vector<std::string>{"", ""});
}

TEST_CASE("a GlooAbort ends the connection set-up from another thread: the wait for an address, and a pair's connect") {
  const auto aborted_after = [](const GlooOptions& o, std::chrono::milliseconds delay) {
    auto abort = std::make_shared<cocod::comm::GlooAbort>();
    std::thread later([abort, delay] {
      std::this_thread::sleep_for(delay);
      abort->abort();
    });
    const auto t0 = Clock::now();
    CHECK_THROWS_WITH_AS(Gloo(o, std::make_shared<cocod::comm::TcpStore>(o.store), abort),
                         doctest::Contains("its connection set-up was ended (abort)"), cocod::Aborted);
    later.join();
    return Clock::now() - t0;
  };
  // a peer that never posts its address (connect_timeout 20 s)
  CHECK(aborted_after(options_for(0, 2, fresh_prefix()), std::chrono::milliseconds(200)) < std::chrono::seconds(2));
  // a peer that posted its address and never connects: this rank waits in the pair's connect,
  // on its listening side (Gloo's connecting side is the one whose address is larger: the peer's,
  // at 127.0.0.2)
  const std::string prefix = fresh_prefix();
  auto device = ::gloo::transport::tcp::CreateDevice(::gloo::transport::tcp::attr("127.0.0.2"));
  auto peer = device->createContext(1, 2);
  cocod::comm::TcpStore(store_address()).set(prefix + "/mesh/1/0", peer->createPair(0)->address().bytes());
  CHECK(aborted_after(options_for(0, 2, prefix), std::chrono::milliseconds(500)) < std::chrono::seconds(3));
}

TEST_CASE("bad settings are refused naming the field; an unreachable store fails within connect_timeout") {
  GlooOptions o = options_for(0, 2, fresh_prefix());
  o.rank = 2;
  CHECK_THROWS_WITH_AS(Gloo{o}, "cocod::comm::GlooOptions: rank must be in [0, size = 2) (got 2)", std::invalid_argument);
  o = options_for(0, 0, "x");
  CHECK_THROWS_WITH_AS(Gloo{o}, "cocod::comm::GlooOptions: size must be >= 1 (got 0)", std::invalid_argument);
  o = options_for(0, 1, "x");
  o.store = "localhost";
  CHECK_THROWS_WITH_AS(Gloo{o}, doctest::Contains("store must be HOST:PORT"), std::invalid_argument);
  o.store = "";
  CHECK_THROWS_WITH_AS(Gloo{o}, doctest::Contains("cocod::comm::GlooOptions: store must be HOST:PORT"), std::invalid_argument);
  o = options_for(0, 1, "x");
  o.store = "127.0.0.1:1";  // nobody listens there
  o.connect_timeout = std::chrono::milliseconds(300);
  const auto start = Clock::now();
  CHECK_THROWS_WITH_AS(Gloo{o}, doctest::Contains("cannot connect to 127.0.0.1:1"), cocod::CommunicationError);
  CHECK(Clock::now() - start < std::chrono::seconds(3));
  // a peer that never comes
  o = options_for(0, 2, fresh_prefix());
  o.connect_timeout = std::chrono::milliseconds(500);
  CHECK_THROWS_WITH_AS(Gloo{o}, doctest::Contains("rank 0 could not connect to its 1 peers"), cocod::CommunicationError);
}

TEST_CASE("rank 0 can serve the store itself") {
  require_no_errors(run_gloo(2, [](Gloo g) {
    std::vector<double> a{1.0 + g.rank()};
    g.all_reduce(std::span<double>(a));
    CHECK(a[0] == 3.0);
  }, [](GlooOptions& o) {
    static const int port = [] {  // a free port: one the system gives, released
      cocod::comm::StoreServer probe("127.0.0.1", 0);
      return probe.port();
    }();
    o.store = "127.0.0.1:" + std::to_string(port);
    o.serve_store = true;
  }));
}

TEST_CASE("a peer process killed in a collective: the survivor's collective throws PeerLost within a second") {
  const std::string prefix = fresh_prefix();
  const pid_t peer = spawn_peer("reduce-once", options_for(1, 2, prefix));
  Gloo g(options_for(0, 2, prefix));
  std::vector<float> a(1 << 20, 1.0f);
  g.all_reduce(std::span<float>(a));  // the peer is connected, reduces once, then sleeps
  CHECK(a[0] == 2.0f);
  auto pending = g.all_reduce_async(std::span<float>(a));  // waits for the peer
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(peer, SIGKILL);
  const auto killed = Clock::now();
  CHECK_THROWS_WITH_AS(pending.wait(), doctest::Contains("rank 0 lost a peer during all_reduce of 1048576 floats"),
                       cocod::PeerLost);
  CHECK(Clock::now() - killed < std::chrono::seconds(1));
  int status = 0;
  ::waitpid(peer, &status, 0);
  // the communicator is broken for good: later collectives say why at once
  CHECK_THROWS_WITH_AS(g.all_reduce(std::span<float>(a)), doctest::Contains("collective aborted: rank 0 lost a peer"),
                       cocod::Aborted);
}

// As a peer process (see spawn_peer): "--peer reduce-once STORE RANK SIZE PREFIX": one all-reduce,
// then it sleeps until killed.
int peer_main(char** argv) {
  GlooOptions o{.store = argv[3], .rank = std::stoi(argv[4]), .size = std::stoi(argv[5]), .prefix = argv[6],
                .hostname = "127.0.0.1", .connect_timeout = std::chrono::seconds(20), .stall_timeout = std::chrono::seconds(20)};
  Gloo g(o);
  std::vector<float> a(1 << 20, 1.0f);
  g.all_reduce(std::span<float>(a));
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return 4;
}

int main(int argc, char** argv) {
  if (argc == 7 && std::string(argv[1]) == "--peer") return peer_main(argv);
  char path[4096] = {};
  if (::readlink("/proc/self/exe", path, sizeof path - 1) <= 0) return 3;
  self_path = path;
  doctest::Context context(argc, argv);
  return context.run();
}
