// The membership of elastic runs on loopback: elastic::Coordinator and elastic::Member. Epochs
// form once enough workers are alive; a worker whose process ends is noticed at once (its
// connection closes), a stopped one after the heartbeat timeout, and told so when it wakes; the
// next epoch continues from the latest round every continuing member holds; waiting workers
// are admitted when the members ask; the coordinator's end is every member's clear error.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/elastic/coordinator.hpp>
#include <cocod/elastic/membership.hpp>
#include <cocod/elastic/train.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "counting_comm.hpp"
#include "support.hpp"

extern char** environ;

namespace {
using cocod::elastic::Coordinator;
using cocod::elastic::CoordinatorOptions;
using cocod::elastic::Epoch;
using cocod::elastic::Member;
using cocod::elastic::MemberOptions;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string self_path;

MemberOptions member_of(const Coordinator& c) {
  return {.coordinator = "127.0.0.1:" + std::to_string(c.port()), .heartbeat_interval = 50ms, .connect_timeout = 10s};
}
bool logged(const Coordinator& c, const std::string& text) {
  for (const auto& line : c.log())
    if (line.find(text) != std::string::npos) return true;
  return false;
}
// Waits up to `limit` for `text` in the coordinator's log.
bool await_log(const Coordinator& c, const std::string& text, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (logged(c, text)) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}
std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}
}  // namespace

TEST_CASE("epochs: formed when --min-workers are alive, shrunk at once when a process ends, grown when the members ask") {
  Coordinator c({.port = 0, .min_workers = 2, .heartbeat_timeout = 2s, .first_epoch_grace = 300ms});
  std::vector<std::unique_ptr<Member>> m;
  for (int i = 0; i < 3; ++i) m.push_back(std::make_unique<Member>(member_of(c)));
  std::vector<Epoch> first(3);
  for (int i = 0; i < 3; ++i) {
    first[i] = m[i]->next_epoch(0, 5s);
    m[i]->settle_start(first[i], {}, 5s);
  }
  CHECK(first[0].members == std::vector<std::int64_t>{1, 2, 3});
  CHECK(first[2].rank == 2);
  CHECK_FALSE(first[0].round.has_value());  // a fresh start
  CHECK(m[1]->gloo_prefix(first[1].number) == "elastic/epoch/1/gloo");

  // worker 2's process ends: its heartbeat connection closes
  const auto t0 = Clock::now();
  m[1].reset();
  Epoch a = m[0]->next_epoch(1, 5s), b = m[2]->next_epoch(1, 5s);
  const auto noticed = Clock::now() - t0;
  CHECK(noticed < 500ms);
  CHECK(a.members == std::vector<std::int64_t>{1, 3});
  CHECK(b.rank == 1);
  // the latest round both hold, their digests agreeing: 6 (worker 1 holds 7 as well)
  std::thread t([&] { m[2]->settle_start(b, {{5, "aa"}, {6, "bb"}}, 5s); });
  m[0]->settle_start(a, {{6, "bb"}, {7, "cc"}}, 5s);
  t.join();
  CHECK(a.round == std::optional<std::int64_t>{6});
  CHECK(b.round == std::optional<std::int64_t>{6});
  CHECK(a.donor == 1);
  CHECK(logged(c, "epoch 2: workers 1,3 (lost worker 2: its connection closed (the process ended))"));
  CHECK(logged(c, "epoch 2 starts: round 6 donor 1"));

  // a newcomer waits until the members ask to admit it at a round end
  auto newcomer = std::make_unique<Member>(member_of(c));
  const auto deadline = Clock::now() + 5s;
  while (m[0]->waiting() != 1 && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  CHECK(m[0]->waiting() == 1);
  m[0]->ask_switch(2);
  Epoch x = m[0]->next_epoch(2, 5s), y = m[2]->next_epoch(2, 5s), z = newcomer->next_epoch(0, 5s);
  CHECK(z.members == std::vector<std::int64_t>{1, 3, 4});
  CHECK((z.rank == 2 && x.rank == 0));
  std::thread u([&] { m[2]->settle_start(y, {{9, "dd"}}, 5s); });
  std::thread v([&] { newcomer->settle_start(z, {}, 5s); });
  m[0]->settle_start(x, {{9, "dd"}}, 5s);
  u.join();
  v.join();
  CHECK(z.round == std::optional<std::int64_t>{9});
  CHECK(z.donor == 1);
  CHECK(logged(c, "epoch 3: workers 1,3,4 (admitted 4 at the members' request)"));

  // members whose states of the chosen round differ: every one learns it
  m[2].reset();
  Epoch p = m[0]->next_epoch(3, 5s), q = newcomer->next_epoch(3, 5s);
  CHECK(p.members == std::vector<std::int64_t>{1, 4});
  std::optional<std::string> other;
  std::thread w([&] {
    try {
      newcomer->settle_start(q, {{12, "ee"}}, 5s);
    } catch (const cocod::DistributedError& e) {
      other = e.what();
    }
  });
  CHECK_THROWS_WITH_AS(m[0]->settle_start(p, {{12, "ff"}}, 5s),
                       "cocod::elastic: epoch 4: the members' states of round 12 differ (2 different positions reported)", cocod::DistributedError);
  w.join();
  CHECK(other == std::optional<std::string>{"cocod::elastic: epoch 4: the members' states of round 12 differ (2 different positions reported)"});
  INFO(joined(c.log()));
}

TEST_CASE("below --min-workers the run waits; a worker that never beats again is expelled after the timeout") {
  Coordinator c({.port = 0, .min_workers = 2, .heartbeat_timeout = 300ms});
  Member a(member_of(c));
  CHECK(await_log(c, "waiting: 1 of --min-workers 2 workers alive", 2s));
  Member b(member_of(c));
  Epoch e = a.next_epoch(0, 5s);
  CHECK(e.members.size() == 2);
  INFO(joined(c.log()));
}

TEST_CASE("a worker's own --min-workers holds the first epoch; the log file; a worker that comes after the end") {
  const std::string log = "/tmp/cocod_test_elastic_" + std::to_string(::getpid()) + ".log";
  std::remove(log.c_str());
  Coordinator c({.port = 0, .min_workers = 1, .first_epoch_grace = 50ms, .log_path = log});
  auto wish = member_of(c);
  wish.min_workers = 2;  // this worker wants a partner
  Member a(wish);
  CHECK(await_log(c, "waiting: 1 of --min-workers 2 workers alive", 2s));
  CHECK_FALSE(logged(c, "epoch 1:"));
  Member b(member_of(c));
  Epoch e = a.next_epoch(0, 5s);
  b.next_epoch(0, 5s);
  CHECK(e.members == std::vector<std::int64_t>{1, 2});
  a.finish();
  CHECK(await_log(c, "epoch 1: the run finished", 2s));
  Member late(member_of(c));
  CHECK_THROWS_WITH_AS(late.next_epoch(0, 5s), "cocod::elastic: worker 3: the run finished without this worker",
                       cocod::elastic::RunFinished);
  std::ifstream file(log);
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  CHECK(text == joined(c.log()));  // the file holds the log, line by line
  std::remove(log.c_str());
  // and a bad setting of the training loop
  cocod::elastic::TrainOptions zero;
  zero.snapshot_every = 0;
  using Trainer = cocod::Optimizer<cocod_test::LeastSquares<double>, cocod::comm::Gloo>;
  const auto train_zero = [&] {
    cocod::elastic::train<Trainer>(late, zero, cocod::Steps{1}, [](int, int) { return cocod_test::LeastSquares<double>(5, 5, 1); },
                                   [](cocod::comm::Gloo c) { return Trainer(c, {}); });
  };
  CHECK_THROWS_WITH_AS(train_zero(), "cocod::elastic::TrainOptions: snapshot_every must be >= 1 (got 0)", std::invalid_argument);
  zero.snapshot_every = 1;
  zero.resume = true;
  CHECK_THROWS_WITH_AS(train_zero(), "cocod::elastic::TrainOptions: resume needs checkpoints (the directory to resume from) (got true)",
                       std::invalid_argument);
  zero.checkpoints.emplace("unused");
  zero.checkpoint_every = 0;
  CHECK_THROWS_WITH_AS(train_zero(), "cocod::elastic::TrainOptions: checkpoint_every must be >= 1 with checkpoints (got 0)",
                       std::invalid_argument);
}

TEST_CASE("a newcomer's larger --min-workers does not hold back the members") {
  Coordinator c({.port = 0, .min_workers = 1, .first_epoch_grace = 50ms});
  Member a(member_of(c)), b(member_of(c));
  Epoch e = a.next_epoch(0, 5s);
  CHECK(b.next_epoch(0, 5s).number == e.number);
  auto wish = member_of(c);
  wish.min_workers = 10;
  Member newcomer(wish);
  a.ask_switch(e.number);  // the members admit it at a round end: the next epoch forms at once
  const Epoch next = a.next_epoch(e.number, 5s);
  CHECK(next.members.size() == 3);
  INFO(joined(c.log()));
}

TEST_CASE("with a token, a member without it (or with another) is refused by name; with it, it joins") {
  Coordinator c({.port = 0, .min_workers = 1, .first_epoch_grace = 50ms, .token = "the-run's-secret"});
  auto none = member_of(c);
  none.connect_timeout = 2s;
  CHECK_THROWS_WITH_AS(Member{none}, doctest::Contains("the store refused this client (no token given"), cocod::CommunicationError);
  auto wrong = none;
  wrong.token = "guess";
  CHECK_THROWS_WITH_AS(Member{wrong}, doctest::Contains("the token is not the run's"), cocod::CommunicationError);
  auto right = none;
  right.token = "the-run's-secret";
  Member m(right);
  CHECK(m.next_epoch(0, 5s).members == std::vector<std::int64_t>{1});
}

TEST_CASE("a stopped worker process is expelled after the heartbeat timeout; woken, it is told and ends") {
  Coordinator c({.port = 0, .min_workers = 1, .heartbeat_timeout = 400ms});
  const std::string address = "127.0.0.1:" + std::to_string(c.port());
  std::vector<std::string> args{self_path, "--member", address};
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, self_path.c_str(), nullptr, nullptr, argv.data(), environ) == 0);
  REQUIRE(await_log(c, "epoch 1: workers 1", 10s));
  ::kill(pid, SIGSTOP);
  const auto stopped = Clock::now();
  CHECK(await_log(c, "worker 1: no heartbeat for 400 ms", 3s));
  CHECK(Clock::now() - stopped > 350ms);
  ::kill(pid, SIGCONT);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);  // told it was expelled (see member_main)
  INFO(joined(c.log()));
}

TEST_CASE("the coordinator's end is every member's clear error") {
  auto c = std::make_unique<Coordinator>(CoordinatorOptions{.port = 0, .min_workers = 1, .heartbeat_timeout = 2s});
  Member a(member_of(*c));
  a.next_epoch(0, 5s);
  c.reset();
  const auto deadline = Clock::now() + 3s;
  std::string error;
  while (error.empty() && Clock::now() < deadline) {
    try {
      a.check();
    } catch (const cocod::CommunicationError& e) {
      error = e.what();
    }
    std::this_thread::sleep_for(10ms);
  }
  CHECK(error.find("cocod::elastic: the coordinator at 127.0.0.1:") != std::string::npos);
  CHECK(error.find("is gone") != std::string::npos);
  CHECK_THROWS_AS(Coordinator({.port = 0, .min_workers = 0}), std::invalid_argument);
}

namespace {
using Model = cocod_test::LeastSquares<double>;

// One elastic worker as a thread: joins (after `delay`), trains algorithm A on its own data
// (seeded by its id), and records its final model and report by id.
struct Fleet {
  explicit Fleet(const Coordinator& c) : coordinator(c) {}
  const Coordinator& coordinator;
  std::mutex mutex;
  std::map<std::int64_t, std::vector<double>> models;   // id -> final consensus
  std::map<std::int64_t, std::string> errors;           // id -> what ended it
  std::vector<std::thread> threads;
  std::map<std::int64_t, cocod::Report> reports;        // id -> its report
  std::map<std::int64_t, std::vector<cocod::elastic::EpochStart>> starts;  // id -> how its epochs began
  std::size_t samples = 0;  // 0: each worker's data is its own 50 samples; else `samples` shared by the epoch's workers

  template <template <class...> class A>
  void start(const cocod_test::Setup& s, std::size_t steps, cocod::elastic::TrainOptions o,
             std::chrono::milliseconds delay = 0ms, std::function<void(const cocod::RoundStats&, const Epoch&, Member&)> fault = {},
             double learning_rate = 0) {
    start<A>(s, cocod::Steps{steps}, o, delay, fault, learning_rate);
  }
  template <template <class...> class A, cocod::StopCondition Stop>
  void start(const cocod_test::Setup& s, Stop stop, cocod::elastic::TrainOptions o,
             std::chrono::milliseconds delay = 0ms, std::function<void(const cocod::RoundStats&, const Epoch&, Member&)> fault = {},
             double learning_rate = 0) {
    threads.emplace_back([this, s, stop, o, delay, fault, learning_rate]() mutable {
      std::this_thread::sleep_for(delay);
      std::int64_t id = 0;
      try {
        Member m(member_of(coordinator));
        id = m.id();
        o.hostname = "127.0.0.1";
        o.stall_timeout = 20s;
        o.epoch_timeout = 20s;
        auto setup = s;
        if (learning_rate > 0) setup.options.learning_rate = learning_rate;
        using Trainer = A<Model, cocod::comm::Gloo>;
        const auto result = cocod::elastic::train<Trainer>(
            m, o, stop,
            [id, n = samples](int, int workers) {
              return Model(n ? n / static_cast<std::size_t>(workers) : 50, 13, 500 + static_cast<std::uint64_t>(id));
            },
            [&](cocod::comm::Gloo c) {
              return std::apply([&](auto&&... p) { return Trainer(c, setup.options, cocod_test::update_of<typename Trainer::update_type>(setup), p...); },
                                cocod_test::family_of<Trainer>(setup));
            },
            [&](const cocod::RoundStats& r, const Epoch& e, const Model&) {
              if (fault) fault(r, e, m);
            });
        std::lock_guard lock(mutex);
        if (result.report) {
          models[id] = result.model->x;
          reports[id] = *result.report;
          starts[id] = result.starts;
        } else {
          errors[id] = "left";
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        errors[id] = e.what();
      }
    });
  }
  void join() {
    for (auto& t : threads) t.join();
    threads.clear();
  }
};

struct Vanish : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

cocod_test::Setup setup() {
  return {.options = {.learning_rate = 0.05, .period = 3, .batch_size = 4, .seed = 9}, .sgd = {.momentum = 0.9}, .compress = {.block = 4}};
}

// The round the log says epoch `e` starts from.
std::optional<std::size_t> start_round(const Coordinator& c, int e) {
  const std::string head = "epoch " + std::to_string(e) + " starts: round ";
  for (const auto& line : c.log())
    if (line.rfind(head, 0) == 0) return std::stoul(line.substr(head.size()));
  return std::nullopt;
}
}  // namespace

TEST_CASE("elastic training with a fixed membership gives the iterates of comm::Threads, bit for bit") {
  Coordinator c({.port = 0, .min_workers = 3, .first_epoch_grace = 200ms});
  Fleet fleet{c};
  for (int i = 0; i < 3; ++i) fleet.start<cocod::Optimizer>(setup(), 40, {}, i * 50ms);
  fleet.join();
  std::vector<std::vector<double>> threads(3);
  cocod::comm::Threads::run(3, [&](cocod::comm::Threads t) {
    Model model(50, 13, 501 + static_cast<std::uint64_t>(t.rank()));
    cocod::Optimizer<Model, cocod::comm::Threads> opt{t, setup().options, cocod::update::Sgd{.momentum = 0.9}};
    opt.optimize(model, cocod::Steps{40});
    threads[static_cast<std::size_t>(t.rank())] = model.x;
  });
  REQUIRE(fleet.models.size() == 3);
  for (const auto& [id, x] : fleet.models) CHECK(same_bits(x, threads[0]));
  INFO(joined(c.log()));
}

TEST_CASE("a worker lost mid-run: the survivors go on from the latest round they hold, as a scripted leave there") {
  std::vector<double> lost_run;
  std::size_t R = 0;
  {
    Coordinator c({.port = 0, .min_workers = 2, .first_epoch_grace = 200ms});
    Fleet fleet{c};
    // (started apart, so that ids follow the order: the data of a worker follows its id)
    fleet.start<cocod::Optimizer>(setup(), 60, {});
    fleet.start<cocod::Optimizer>(setup(), 60, {}, 50ms);
    fleet.start<cocod::Optimizer>(setup(), 60, {}, 100ms, [](const cocod::RoundStats& r, const Epoch&, Member&) {
      if (r.round == 5) throw Vanish("vanished");
    });
    fleet.join();
    INFO(joined(c.log()));
    REQUIRE(fleet.models.size() == 2);
    const auto& a = fleet.models.begin()->second;
    for (const auto& [id, x] : fleet.models) CHECK(same_bits(x, a));  // every survivor ends with the same model
    REQUIRE(start_round(c, 2).has_value());
    R = *start_round(c, 2);
    CHECK((R == 5 || R == 6));  // the vanished worker's last round end (6 rounds done), or the one before
    CHECK(logged(c, "epoch 2: workers"));
    lost_run = a;
  }
  Coordinator c({.port = 0, .min_workers = 2, .first_epoch_grace = 200ms});
  Fleet fleet{c};
  cocod::elastic::TrainOptions replay;
  replay.script = {R};
  cocod::elastic::TrainOptions leave;
  leave.leave_after_round = R;
  fleet.start<cocod::Optimizer>(setup(), 60, replay);
  fleet.start<cocod::Optimizer>(setup(), 60, replay, 50ms);
  fleet.start<cocod::Optimizer>(setup(), 60, leave, 100ms);
  fleet.join();
  INFO(joined(c.log()));
  for (const auto& [id, e] : fleet.errors) INFO(id, ": ", e);
  REQUIRE(fleet.models.size() == 2);
  for (const auto& [id, x] : fleet.models) CHECK(same_bits(x, lost_run));
}

TEST_CASE("a worker lost before the first round end of an epoch: the next continues from the round that one began at") {
  // Epoch 2 begins at round 4 (scripted); no state is kept at round 5 (snapshot_every 4), where
  // worker 3 vanishes: the survivors still hold round 4, where they began, and go on from there.
  Coordinator c({.port = 0, .min_workers = 2, .first_epoch_grace = 200ms});
  Fleet fleet{c};
  cocod::elastic::TrainOptions o;
  o.script = {4};
  o.snapshot_every = 4;
  fleet.start<cocod::Optimizer>(setup(), 60, o);
  fleet.start<cocod::Optimizer>(setup(), 60, o, 50ms);
  fleet.start<cocod::Optimizer>(setup(), 60, o, 100ms, [](const cocod::RoundStats& r, const Epoch&, Member&) {
    if (r.round == 4) throw Vanish("vanished");
  });
  fleet.join();
  INFO(joined(c.log()));
  CHECK(logged(c, "epoch 2 starts: round 4 donor 1"));
  CHECK(logged(c, "epoch 3 starts: round 4 donor 1"));
  REQUIRE(fleet.models.size() == 2);
  CHECK(same_bits(fleet.models.begin()->second, fleet.models.rbegin()->second));
}

namespace {
// Members that wait, at round end `at`, until they see a newcomer waiting to be admitted (their
// heartbeat read it from the coordinator), so that the admission, scripted or asked by the
// members, finds it there however slowly the machine runs; or until the coordinator formed the
// next epoch (another member saw it first and the newcomer was admitted: it waits no more).
std::function<void(const cocod::RoundStats&, const Epoch&, Member&)> hold_until_waiting(std::size_t at) {
  return [at, held = std::make_shared<bool>(false)](const cocod::RoundStats& r, const Epoch& e, Member& m) {
    if (r.round + 1 != at || std::exchange(*held, true)) return;
    const auto deadline = Clock::now() + 10s;
    while (m.waiting() < 1 && !m.replaced(e.number) && Clock::now() < deadline) std::this_thread::sleep_for(2ms);
  };
}

// 3 workers; worker 3 leaves after round 3; worker 4 joins and is admitted after round 6. Every
// worker that finishes ends with the same model; returns it.
template <template <class...> class A>
std::vector<double> leave_and_join(const cocod_test::Setup& s) {
  Coordinator c({.port = 0, .min_workers = 2, .first_epoch_grace = 200ms});
  Fleet fleet{c};
  cocod::elastic::TrainOptions member, leaver;
  member.script = {3, 6};
  leaver.leave_after_round = 3;
  fleet.start<A>(s, 40, member, 0ms, hold_until_waiting(6));
  fleet.start<A>(s, 40, member, 50ms, hold_until_waiting(6));
  fleet.start<A>(s, 40, leaver, 100ms);
  while (!logged(c, "starts: round 3 donor 1")) std::this_thread::sleep_for(2ms);
  cocod::elastic::TrainOptions joiner;
  joiner.script = {6};
  fleet.start<A>(s, 40, joiner);
  fleet.join();
  INFO(joined(c.log()));
  for (const auto& [id, e] : fleet.errors) INFO(id, ": ", e);
  CHECK(logged(c, "workers 1,2 (lost worker 3: it left at a round end)"));
  CHECK(logged(c, "starts: round 3 donor 1"));
  CHECK(logged(c, "workers 1,2,4 (admitted 4 at the members' request)"));
  CHECK(logged(c, "starts: round 6 donor 1"));
  cocod::comm::TcpStore store("127.0.0.1:" + std::to_string(c.port()), 10s);
  const cocod::elastic::protocol::Keys keys;
  const auto newest = store.try_get(keys.epoch());
  REQUIRE(newest);
  const std::int64_t last = std::stoll(std::string(newest->begin(), newest->end()));
  REQUIRE(last >= 3);
  for (std::int64_t e = 1; e <= last; ++e) {  // the epochs before the last two are forgotten (the store's quota)
    CAPTURE(e);
    CHECK(store.try_get(keys.members(e)).has_value() == (e >= last - 1));
  }
  REQUIRE(fleet.models.size() == 3);  // 1, 2 and 4 finish
  const auto& a = fleet.models.begin()->second;
  for (const auto& [id, x] : fleet.models) CHECK(same_bits(x, a));
  return a;
}
}  // namespace

TEST_CASE("Epochs keeps the passes over the data it promised whatever the membership") {
  // 600 samples shared by the epoch's workers, batches of 4: 50 steps a pass with 3 workers, 75
  // with 2. Worker 3 leaves after round 5 (step 15, 0.3 passes), worker 4 is admitted after
  // round 20 (step 60: 0.3 + 45/75 = 0.9 passes); 2 passes are due in all.
  Coordinator c({.port = 0, .min_workers = 2, .first_epoch_grace = 200ms});
  Fleet fleet{c};
  fleet.samples = 600;
  cocod::elastic::TrainOptions member, leaver, joiner;
  member.script = {5, 20};
  leaver.leave_after_round = 5;
  joiner.script = {20};
  fleet.start<cocod::Optimizer>(setup(), cocod::Epochs{2}, member, 0ms, hold_until_waiting(20));
  fleet.start<cocod::Optimizer>(setup(), cocod::Epochs{2}, member, 50ms, hold_until_waiting(20));
  fleet.start<cocod::Optimizer>(setup(), cocod::Epochs{2}, leaver, 100ms);
  while (!logged(c, "starts: round 5 donor 1")) std::this_thread::sleep_for(2ms);
  fleet.start<cocod::Optimizer>(setup(), cocod::Epochs{2}, joiner);
  fleet.join();
  INFO(joined(c.log()));
  for (const auto& [id, e] : fleet.errors) INFO(id, ": ", e);
  REQUIRE(logged(c, "starts: round 20 donor 1"));
  REQUIRE(fleet.reports.size() == 3);
  // The steps still due at step 60: (2 - 0.9) * 50 = 55, so 115 in all (counted from the 2
  // workers' epoch, 15 + ceil(1.7 * 75) = 143; from the 3 workers' steps alone, 100).
  for (const auto& [id, r] : fleet.reports) {
    CAPTURE(id);
    CHECK(r.info.total_steps == 115);
    CHECK(r.steps == 115);
    CHECK(r.epochs == doctest::Approx(2.0));
  }
  // How each epoch began: workers 1 and 2 trained in three epochs, the newcomer in the last
  // (an epoch the coordinator replaced before it started is not among them), one after the other.
  for (const auto& [id, starts] : fleet.starts) {
    CAPTURE(id);
    REQUIRE(starts.size() == (id == 4 ? 1u : 3u));
    CHECK(logged(c, "epoch " + std::to_string(starts.back().epoch) + " starts: round 20 donor 1"));
    for (std::size_t i = 0; i < starts.size(); ++i) {
      const auto& t = starts[i];
      if (i > 0) CHECK(t.epoch > starts[i - 1].epoch);
      for (const double phase : {t.formed, t.agreed, t.connected, t.made, t.continued, t.first_round}) CHECK(phase >= 0.0);
      CHECK(t.connected > 0.0);
      CHECK(t.total() < 20.0);
      if (i > 0) CHECK(t.since_unix >= starts[i - 1].since_unix + starts[i - 1].total());
    }
  }
}

TEST_CASE("every algorithm and the family's exchanges survive a leave and a join, reproducibly") {
  auto s = setup();
  const auto first = leave_and_join<cocod::Optimizer>(s);
  CHECK(same_bits(leave_and_join<cocod::Optimizer>(s), first));  // the same changes at the same rounds: the same bits
  leave_and_join<cocod::SyncSGD>(s);
  leave_and_join<cocod::LocalSGD>(s);
  leave_and_join<cocod::PipeSGD>(s);
  leave_and_join<cocod::OverlapLocalSGD>(s);
  leave_and_join<cocod::DelayedDiLoCo>(s);
  s.compress.format = cocod::Compression::int8;
  s.outer = cocod::Outer::diloco();
  s.fragments.count = 3;
  leave_and_join<cocod::Optimizer>(s);
  leave_and_join<cocod::LocalSGD>(s);
  s.delay.start = cocod::OuterStart::delayed;  // its progress not yet posted is posted again, weighted anew
  const auto delayed = leave_and_join<cocod::DelayedDiLoCo>(s);
  CHECK(same_bits(leave_and_join<cocod::DelayedDiLoCo>(s), delayed));
}

namespace {
// The local update's state in a state's bytes: its buffers in turn (and Adam's step count).
std::vector<double> update_state_of(const cocod::elastic::Snapshots::Snapshot& state, const std::vector<std::string>& buffers) {
  const cocod::checkpoint::FileReader file(state.bytes, "state");
  auto f = file.fields("update");
  std::vector<double> all;
  for (const auto& name : buffers) {
    const auto v = f.values<double>(name);
    all.insert(all.end(), v.begin(), v.end());
  }
  if (buffers.size() == 2) all.push_back(static_cast<double>(f.value<std::uint64_t>("steps")));
  return all;
}

// The fields of a section of a state's bytes, one after the other.
std::vector<std::byte> section_of(const cocod::elastic::Snapshots::Snapshot& state, const char* section) {
  const cocod::checkpoint::FileReader file(state.bytes, "state");
  auto f = file.fields(section);
  std::vector<std::byte> all;
  for (std::string name(f.next_name()); !name.empty(); name = f.next_name()) {
    const auto b = f.bytes(name);
    all.insert(all.end(), b.begin(), b.end());
  }
  return all;
}

// One field of a section of a state's bytes, as doubles.
std::vector<double> field_of(const cocod::elastic::Snapshots::Snapshot& state, const char* section, const std::string& field) {
  const cocod::checkpoint::FileReader file(state.bytes, "state");
  auto f = file.fields(section);
  for (std::string name(f.next_name()); !name.empty(); name = f.next_name()) {
    if (name == field) return f.values<double>(name);
    (void)f.bytes(name);
  }
  return {};
}

// Steps `t` until `rounds` more rounds ended.
template <class Trainer>
void take_rounds(Trainer& t, Model& model, std::size_t rounds) {
  for (std::size_t ended = 0; ended < rounds;) {
    t.step(model, t.next_batch());
    ended += t.round_ended();
  }
}

enum class Held { own, alike };

// 2 workers keep their states at their second round end, take a round more (what `part` reads
// of a state moves on), then continue from that round end as a new epoch would: once both
// holding it, once with worker 1 holding nothing (a newcomer). Each continues with its own part
// of the state (a newcomer with the donor's); `held`: the workers' parts differ, or are alike.
template <class Trainer, class Part>
void check_kept(const cocod_test::Setup& s, Held held, Part part) {
  using Values = decltype(part(std::declval<const cocod::elastic::Snapshots::Snapshot&>()));
  for (const bool newcomer : {false, true}) {
    CAPTURE(newcomer);
    std::vector<Values> kept(2), continued(2);
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
      const auto r = static_cast<std::size_t>(comm.rank());
      cocod::elastic::Snapshots snapshots;
      Model model(50, 13, 500 + r);
      auto first = cocod_test::make<Trainer>(comm, s);
      first.begin(model, cocod::Steps{60});
      take_rounds(first, model, 2);
      first.save(model, snapshots);
      kept[r] = part(snapshots.held().back());
      const std::size_t round = snapshots.held().back().round;
      take_rounds(first, model, 1);
      first.save(model, snapshots);
      CHECK(part(snapshots.held().back()) != kept[r]);  // it moved on
      (void)first.finish(model);
      if (newcomer && r == 1) snapshots.clear();
      snapshots.plan({.round = round, .donor = 0, .epoch = 2});
      Model next(50, 13, 500 + r);
      auto second = cocod_test::make<Trainer>(comm, s);
      const cocod::Resumed from = second.resume(next, snapshots, cocod::Steps{60});
      CHECK(from.round == round);
      second.save(next, snapshots);  // the state it continues from, at once
      continued[r] = part(snapshots.held().back());
    });
    REQUIRE(kept[0].size() >= 13);  // (at least one value per parameter)
    CHECK((kept[0] != kept[1]) == (held == Held::own));
    CHECK(continued[0] == kept[0]);
    CHECK(continued[1] == (newcomer ? kept[0] : kept[1]));
  }
}

template <class Update>
void check_own_update_state(const std::vector<std::string>& buffers) {
  using Trainer = cocod::CoCoDSGD<Model, cocod::comm::Threads, cocod::schedule::Fixed<>, Update>;
  check_kept<Trainer>(setup(), Held::own, [&](const auto& state) { return update_state_of(state, buffers); });
}
template <template <class...> class A>
void check_carried(const cocod_test::Setup& s, Held held) {
  check_kept<A<Model, cocod::comm::Threads>>(s, held, [](const auto& state) { return section_of(state, "carried"); });
}
}  // namespace

TEST_CASE("a member continues with its own momentum of the round it continues from; a newcomer with the donor's") {
  check_own_update_state<cocod::update::Sgd>({"velocity"});
  check_own_update_state<cocod::update::AdamW>({"first_moment", "second_moment"});  // and the step count
}

TEST_CASE("a new epoch keeps the algorithm's momentum (outer, anchor) and the progress a delayed start had not posted") {
  auto s = setup();
  s.outer = cocod::Outer::diloco();
  check_carried<cocod::Optimizer>(s, Held::alike);  // the outer momentum: every worker's alike
  check_carried<cocod::LocalSGD>(s, Held::alike);
  check_carried<cocod::DelayedDiLoCo>(s, Held::own);  // eager: each worker's own outer momentum too
  s.delay.start = cocod::OuterStart::delayed;
  check_carried<cocod::DelayedDiLoCo>(s, Held::own);  // each worker's progress, posted again
  s.fragments.count = 3;
  check_carried<cocod::DelayedDiLoCo>(s, Held::own);
  s.pull.anchor_momentum = 0.5;
  check_carried<cocod::OverlapLocalSGD>(s, Held::own);  // each worker's anchor momentum
}

TEST_CASE("the donor's state moves only to an epoch with newcomers, as bytes, without its parameters") {
  using Comm = Counting<cocod::comm::Threads>;
  using Trainer = cocod::CoCoDSGD<Model, Comm>;
  const auto s = setup();
  struct Moved {
    std::size_t collectives = 0, bytes = 0;
  };
  std::vector<Moved> moved[2];  // [newcomer][rank]
  std::size_t given = 0, parameters_section = 0;
  for (const bool newcomer : {false, true}) {
    moved[newcomer].resize(2);
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads threads) {
      const auto r = static_cast<std::size_t>(threads.rank());
      auto counts = std::make_shared<Comm::Counts>();
      Comm comm(threads, counts);
      cocod::elastic::Snapshots snapshots;
      Model model(50, 13, 500 + r);
      auto first = cocod_test::make<Trainer>(comm, s);
      first.begin(model, cocod::Steps{60});
      take_rounds(first, model, 2);
      first.save(model, snapshots);
      const std::size_t round = snapshots.held().back().round;
      if (r == 0) {  // what a newcomer is given: the donor's state but its parameters
        const cocod::checkpoint::FileReader file(snapshots.held().back().bytes, "state");
        for (const auto& section : file.sections())
          if (section.name == "parameters")
            parameters_section = 4 + section.name.size() + 8 + section.payload.size() + 4;  // name, size, payload, CRC
        given = snapshots.held().back().bytes.size() - parameters_section;
      }
      (void)first.finish(model);
      if (newcomer && r == 1) snapshots.clear();
      snapshots.plan({.round = round, .donor = 0, .epoch = 2});
      Model next(50, 13, 500 + r);
      auto second = cocod_test::make<Trainer>(comm, s);
      const std::size_t collectives = counts->collectives, bytes = counts->bytes;
      REQUIRE(second.resume(next, snapshots, cocod::Steps{60}).round == round);
      moved[newcomer][r] = {counts->collectives - collectives, counts->bytes - bytes};
    });
  }
  REQUIRE(parameters_section > 13 * sizeof(double));
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    // With a newcomer: the donor's bytes broadcast, and the agreed check of its settings (one
    // double a worker); without one, neither.
    CHECK(moved[1][r].collectives == moved[0][r].collectives + 2);
    CHECK(moved[1][r].bytes == moved[0][r].bytes + given + 2 * sizeof(double));
  }
}

TEST_CASE("a delayed start's progress not yet posted is weighted for the new membership; its z and s are kept") {
  auto s = setup();
  s.delay.start = cocod::OuterStart::delayed;
  using Trainer = cocod::DelayedDiLoCo<Model, cocod::comm::Threads>;
  std::vector<cocod::elastic::Snapshots> snapshots(2);
  std::size_t round = 0;
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {  // weights 1/2
    const auto r = static_cast<std::size_t>(comm.rank());
    Model model(50, 13, 500 + r);
    auto t = cocod_test::make<Trainer>(comm, s);
    t.begin(model, cocod::Steps{60});
    take_rounds(t, model, 2);
    t.save(model, snapshots[r]);
    round = snapshots[r].held().back().round;
    (void)t.finish(model);
  });
  const auto& kept = snapshots[0].held().back();
  const auto progress = field_of(kept, "carried", "progress"), z = field_of(kept, "carried", "outer_model");
  REQUIRE(progress.size() == 13);
  REQUIRE(z.size() == 13);
  snapshots[0].plan({.round = round, .donor = 0, .epoch = 2});
  cocod::comm::Threads::run(1, [&](cocod::comm::Threads comm) {  // worker 0 alone: weight 1
    Model model(50, 13, 500);
    auto t = cocod_test::make<Trainer>(comm, s);
    REQUIRE(t.resume(model, snapshots[0], cocod::Steps{60}).round == round);
    t.save(model, snapshots[0]);
  });
  const auto& continued = snapshots[0].held().back();
  std::vector<double> doubled(progress.size());
  for (std::size_t i = 0; i < progress.size(); ++i) doubled[i] = 2 * progress[i];
  CHECK(field_of(continued, "carried", "progress") == doubled);  // w_1 P, posted again as 1 * P
  CHECK(field_of(continued, "carried", "outer_model") == z);
  CHECK(field_of(continued, "carried", "start") == field_of(kept, "carried", "start"));
}

TEST_CASE("a newcomer with other settings is refused by name; the members go on without it") {
  Coordinator c({.port = 0, .min_workers = 2, .first_epoch_grace = 200ms});
  Fleet fleet{c};
  cocod::elastic::TrainOptions member;
  fleet.start<cocod::Optimizer>(setup(), 60, member, 0ms, hold_until_waiting(1));
  fleet.start<cocod::Optimizer>(setup(), 60, member, 50ms, hold_until_waiting(1));
  while (!logged(c, "epoch 1 starts")) std::this_thread::sleep_for(2ms);
  fleet.start<cocod::Optimizer>(setup(), 60, {}, 0ms, {}, 0.01);  // another learning rate
  fleet.join();
  INFO(joined(c.log()));
  REQUIRE(fleet.errors.count(3) == 1);
  CHECK(fleet.errors[3].find("Options::learning_rate") != std::string::npos);
  CHECK(fleet.errors[3].find("in-memory state of round") != std::string::npos);
  CHECK(fleet.models.size() == 2);
  CHECK(logged(c, "lost worker 3: it left with its settings refused"));  // told before its connection closed
}

// The settings every member of an epoch shares, as the refusal lists them.
#define AGREED                                                                                                    \
  "TrainOptions::checkpoints, TrainOptions::checkpoint_every, TrainOptions::resume, TrainOptions::snapshot_every, " \
  "Options::period, Options::non_finite, Options::max_skips, the kind of the run's stop and the run's length (its stop)"

TEST_CASE("a newcomer with another length, period, non_finite or max_skips is refused by name before training") {
  using cocod::NonFinite;
  struct Case {
    const char* field;
    std::size_t steps, period;
    NonFinite non_finite;
    std::size_t max_skips;
    NonFinite members;  // the members' non_finite
  };
  for (const Case& k : {Case{"the run's length (its stop) differs from the run's (rank 0 of epoch 2: 60 steps at 2^20 steps "
                             "per epoch, this worker: 90 steps at 2^20 steps per epoch)", 90, 3, NonFinite::raise, 3,
                             NonFinite::raise},
                        Case{"Options::period differs from the run's (rank 0 of epoch 2: 3, this worker: 4)", 60, 4,
                             NonFinite::raise, 3, NonFinite::raise},
                        Case{"Options::non_finite differs from the run's (rank 0 of epoch 2: raise, this worker: off)", 60, 3,
                             NonFinite::off, 3, NonFinite::raise},
                        Case{"Options::max_skips differs from the run's (rank 0 of epoch 2: 3, this worker: 5)", 60, 3,
                             NonFinite::skip, 5, NonFinite::skip}}) {
    CAPTURE(k.field);
    Coordinator c({.port = 0, .min_workers = 2, .first_epoch_grace = 200ms});
    Fleet fleet{c};
    cocod_test::Setup members = setup(), other = setup();
    members.options.non_finite = k.members;
    other.options.period = k.period;
    other.options.non_finite = k.non_finite;
    other.options.max_skips = k.max_skips;
    fleet.start<cocod::Optimizer>(members, 60, {}, 0ms, hold_until_waiting(1));
    fleet.start<cocod::Optimizer>(members, 60, {}, 50ms, hold_until_waiting(1));
    while (!logged(c, "epoch 1 starts")) std::this_thread::sleep_for(2ms);
    fleet.start<cocod::Optimizer>(other, k.steps, {});
    fleet.join();
    INFO(joined(c.log()));
    REQUIRE(fleet.errors.count(3) == 1);
    CHECK(fleet.errors[3] == std::string("cocod::elastic: ") + k.field + ": every worker passes the same " AGREED);
    CHECK(fleet.models.size() == 2);
    CHECK(logged(c, "lost worker 3: it left with its settings refused"));
  }
}

TEST_CASE("a newcomer with other checkpoint settings is refused by name; the members go on without it") {
  Coordinator c({.port = 0, .min_workers = 2, .first_epoch_grace = 200ms});
  Fleet fleet{c};
  fleet.start<cocod::Optimizer>(setup(), 60, {}, 0ms, hold_until_waiting(1));
  fleet.start<cocod::Optimizer>(setup(), 60, {}, 50ms, hold_until_waiting(1));
  while (!logged(c, "epoch 1 starts")) std::this_thread::sleep_for(2ms);
  cocod::elastic::TrainOptions other;
  other.checkpoints.emplace("/tmp/cocod_test_elastic_unused_" + std::to_string(::getpid()));
  fleet.start<cocod::Optimizer>(setup(), 60, other);
  fleet.join();
  INFO(joined(c.log()));
  REQUIRE(fleet.errors.count(3) == 1);
  CHECK(fleet.errors[3] ==
        "cocod::elastic: TrainOptions::checkpoints differs from the run's (rank 0 of epoch 2: none, this worker: a directory): "
        "every worker passes the same " AGREED);
  CHECK(fleet.models.size() == 2);
  CHECK(logged(c, "lost worker 3: it left with its settings refused"));
  std::error_code ignored;
  std::filesystem::remove_all(other.checkpoints->directory(), ignored);  // (nothing was written there)
}

TEST_CASE("in a first epoch the settings most workers pass are the run's, whichever rank differs") {
  Coordinator c({.port = 0, .min_workers = 2, .first_epoch_grace = 500ms});
  Fleet fleet{c};
  cocod::elastic::TrainOptions odd;
  odd.snapshot_every = 2;
  fleet.start<cocod::Optimizer>(setup(), 60, odd);  // worker 1: rank 0 of epoch 1
  fleet.start<cocod::Optimizer>(setup(), 60, {}, 50ms);
  fleet.start<cocod::Optimizer>(setup(), 60, {}, 100ms);
  fleet.join();
  INFO(joined(c.log()));
  REQUIRE(logged(c, "epoch 1: workers 1,2,3"));
  REQUIRE(fleet.errors.count(1) == 1);
  CHECK(fleet.errors[1] ==
        "cocod::elastic: TrainOptions::snapshot_every differs from the run's (rank 1 of epoch 1: 1, this worker: 2): "
        "every worker passes the same " AGREED);
  CHECK(fleet.models.size() == 2);  // workers 2 and 3 go on without it
  CHECK(logged(c, "lost worker 1: it left with its settings refused"));
}

TEST_CASE("in a first epoch whose workers' settings split evenly, rank 0's are the run's") {
  Coordinator c({.port = 0, .min_workers = 2, .first_epoch_grace = 500ms});
  Fleet fleet{c};
  cocod::elastic::TrainOptions odd;
  odd.snapshot_every = 2;
  fleet.start<cocod::Optimizer>(setup(), 60, odd);  // workers 1 and 2: ranks 0 and 1 of epoch 1
  fleet.start<cocod::Optimizer>(setup(), 60, odd, 50ms);
  fleet.start<cocod::Optimizer>(setup(), 60, {}, 100ms);
  fleet.start<cocod::Optimizer>(setup(), 60, {}, 150ms);
  fleet.join();
  INFO(joined(c.log()));
  REQUIRE(logged(c, "epoch 1: workers 1,2,3,4"));
  for (const std::int64_t id : {3, 4}) {
    REQUIRE(fleet.errors.count(id) == 1);
    CHECK(fleet.errors[id] ==
          "cocod::elastic: TrainOptions::snapshot_every differs from the run's (rank 0 of epoch 1: 2, this worker: 1): "
          "every worker passes the same " AGREED);
  }
  CHECK(fleet.models.size() == 2);  // workers 1 and 2 go on
}

// As a member process: "--member HOST:PORT": joins, then checks every 20 ms whether it was
// expelled; exits 3 when told (printing why), 4 after 30 s.
int member_main(const char* address) {
  Member m({.coordinator = address, .heartbeat_interval = 50ms, .connect_timeout = 10s});
  const auto until = Clock::now() + 30s;
  while (Clock::now() < until) {
    try {
      m.check();
    } catch (const cocod::elastic::Expelled& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 3;
    }
    std::this_thread::sleep_for(20ms);
  }
  return 4;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--member") return member_main(argv[2]);
  char path[4096] = {};
  if (::readlink("/proc/self/exe", path, sizeof path - 1) <= 0) return 5;
  self_path = path;
  doctest::Context context(argc, argv);
  return context.run();
}
