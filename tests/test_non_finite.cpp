// The non-finite guard: a model that returns NaN on one worker at a chosen step. Every worker
// learns of it from the same reduction (no extra collective); NonFinite::raise throws the same
// NonFiniteError on every worker with the model left finite; NonFinite::skip skips, counts and
// raises after max_skips in a row; without any NaN the guard changes no bit of a run.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "unaware_rule.hpp"

#include "support.hpp"

namespace {
using Base = cocod_test::LeastSquares<double>;

/// Least squares whose loss and gradient are NaN on worker `bad_rank` at its local steps in
/// [nan_from, nan_to).
struct Flaky : Base {
  using Base::Base;
  int rank = 0, bad_rank = -1;
  std::size_t calls = 0, nan_from = 0, nan_to = 0;
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<double> g) {
    const double loss = Base::loss_and_gradient(batch, g);
    const bool nan = rank == bad_rank && calls >= nan_from && calls < nan_to;
    ++calls;
    if (!nan) return loss;
    g[0] = std::numeric_limits<double>::quiet_NaN();
    return std::numeric_limits<double>::quiet_NaN();
  }
};

struct Outcome {
  std::vector<std::string> errors;
  std::vector<std::vector<double>> x;
  std::size_t skipped = 0, steps = 0;
};

template <template <class...> class Algorithm>
Outcome run(const cocod_test::Setup& o, int bad_rank, std::size_t nan_from, std::size_t nan_to, int workers = 3) {
  Outcome out{std::vector<std::string>(static_cast<std::size_t>(workers)),
              std::vector<std::vector<double>>(static_cast<std::size_t>(workers)), 0, 0};
  std::mutex m;
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    Flaky model(40, 5, 60 + static_cast<std::uint64_t>(comm.rank()));
    model.rank = comm.rank();
    model.bad_rank = bad_rank;
    model.nan_from = nan_from;
    model.nan_to = nan_to;
    auto opt = cocod_test::make<Algorithm<Flaky, cocod::comm::Threads>>(comm, o);
    const auto r = static_cast<std::size_t>(comm.rank());
    try {
      const auto report = opt.optimize(model, cocod::Steps{40});
      std::lock_guard lock(m);
      if (r == 0) {
        out.skipped = static_cast<std::size_t>(report.total(&cocod::RoundStats::skipped));
        out.steps = report.steps;
      }
    } catch (const cocod::NonFiniteError& e) {
      out.errors[r] = e.what();
    }
    out.x[r] = model.x;
  });
  return out;
}

bool finite(const std::vector<double>& x) {
  for (double v : x)
    if (!std::isfinite(v)) return false;
  return true;
}

const cocod_test::Setup base{{.learning_rate = 0.05, .period = 4, .batch_size = 4, .seed = 2}, {.momentum = 0.9}};

template <template <class...> class Algorithm>
void check(const char* name, const cocod_test::Setup& base = ::base) {
  CAPTURE(name);
  SUBCASE("raise: the same NonFiniteError on every worker, naming the rank and the step; the model finite") {
    const Outcome o = run<Algorithm>(base, 1, 9, 10);
    for (const auto& e : o.errors) {
      CAPTURE(e);
      CHECK(e == o.errors[0]);
      CHECK(e.find("rank 1 had a non-finite loss at step 9") != std::string::npos);
    }
    for (const auto& x : o.x) CHECK(finite(x));
  }
  SUBCASE("skip: the run goes on, the skip is counted, the model is finite") {
    auto opt = base;
    opt.options.non_finite = cocod::NonFinite::skip;
    const Outcome o = run<Algorithm>(opt, 2, 9, 10);
    for (const auto& e : o.errors) CHECK(e.empty());
    CHECK(o.skipped == 1);
    CHECK(o.steps == 40);
    for (const auto& x : o.x) CHECK(finite(x));
  }
  SUBCASE("skip: max_skips consecutive skips raise") {
    auto opt = base;
    opt.options.non_finite = cocod::NonFinite::skip;
    opt.options.max_skips = 2;
    const Outcome o = run<Algorithm>(opt, 0, 5, 1000);  // NaN from step 5 on, for good
    for (const auto& e : o.errors) {
      CAPTURE(e);
      CHECK(e.find("2 reductions in a row were skipped (Options::max_skips = 2)") != std::string::npos);
      CHECK(e.find("rank 0 had a non-finite") != std::string::npos);
    }
  }
  SUBCASE("without a NaN the guard changes no bit") {
    auto off = base;
    off.options.non_finite = cocod::NonFinite::off;
    const Outcome guarded = run<Algorithm>(base, -1, 0, 0), plain = run<Algorithm>(off, -1, 0, 0);
    CHECK(guarded.x == plain.x);
  }
  SUBCASE("off: the NaN spreads to every worker") {
    auto off = base;
    off.options.non_finite = cocod::NonFinite::off;
    const Outcome o = run<Algorithm>(off, 1, 9, 10);
    for (const auto& x : o.x) CHECK_FALSE(finite(x));
  }
}
}  // namespace

TEST_CASE("non-finite values: CoCoD-SGD") { check<cocod::Optimizer>("cocod"); }
TEST_CASE("non-finite values: CoCoD-SGD with an overlap depth") {
  auto o = ::base;
  o.depth.steps = 1;
  check<cocod::Optimizer>("cocod, depth 1", o);
  o.depth.steps = 0;
  check<cocod::Optimizer>("cocod, depth 0", o);
  o.depth.steps = 2;
  o.outer = cocod::Outer::diloco();
  o.compress.format = cocod::Compression::int8;
  o.fragments.count = 2;
  check<cocod::Optimizer>("cocod + outer + int8 + 2 fragments, depth 2", o);
}
TEST_CASE("non-finite values: DiLoCo with delayed outer gradients, eager and delayed") {
  auto o = ::base;
  check<cocod::DelayedDiLoCo>("delayed diloco, eager", o);
  o.delay.start = cocod::OuterStart::delayed;
  check<cocod::DelayedDiLoCo>("delayed diloco, delayed", o);
  o.delay.start = cocod::OuterStart::eager;
  o.compress.format = cocod::Compression::int8;
  o.fragments.count = 2;
  check<cocod::DelayedDiLoCo>("delayed diloco, eager + int8 + 2 fragments", o);
}
TEST_CASE("delayed DiLoCo's eager start: a worker that found a NaN loss restarts from the shared model at the round's end, "
          "not from its own outer step on the NaN") {
  auto o = ::base;
  o.options.non_finite = cocod::NonFinite::skip;
  std::vector<int> finite_rounds(3, 0);
  cocod::comm::Threads::run(3, [&](cocod::comm::Threads comm) {
    Flaky model(40, 5, 60 + static_cast<std::uint64_t>(comm.rank()));
    model.rank = comm.rank();
    model.bad_rank = 2;
    model.nan_from = 9;
    model.nan_to = 10;
    auto opt = cocod_test::make<cocod::DelayedDiLoCo<Flaky, cocod::comm::Threads>>(comm, o);
    opt.begin(model);
    for (std::size_t step = 0; step < 24; ++step) {
      opt.step(model, opt.next_batch());
      if (opt.round_ended() && finite(model.x)) ++finite_rounds[static_cast<std::size_t>(comm.rank())];
    }
    opt.finish(model);
    CHECK(finite(model.x));
  });
  CHECK(finite_rounds == std::vector<int>{6, 6, 6});  // every round's end, the NaN's (round 2) included
}
TEST_CASE("non-finite values: S-SGD") { check<cocod::SyncSGD>("ssgd"); }
TEST_CASE("non-finite values: Local-SGD") { check<cocod::LocalSGD>("local"); }
TEST_CASE("non-finite values: Pipe-SGD") { check<cocod::PipeSGD>("pipe"); }
TEST_CASE("non-finite values: Overlap-Local-SGD") { check<cocod::OverlapLocalSGD>("overlap"); }
TEST_CASE("non-finite values: the family's options") {
  auto o = ::base;
  o.outer = cocod::Outer::diloco();
  check<cocod::LocalSGD>("local + outer", o);
  o.compress.format = cocod::Compression::int8;
  check<cocod::LocalSGD>("local + outer + int8", o);
  o.fragments.count = 2;
  check<cocod::Optimizer>("cocod + outer + int8 + 2 fragments", o);
  o.fragments.count = 1;
  check<cocod::Optimizer>("cocod + outer + int8", o);
  auto overlap = ::base;
  overlap.compress.format = cocod::Compression::bf16;
  overlap.pull.anchor_momentum = 0.5;
  check<cocod::OverlapLocalSGD>("overlap + bf16", overlap);
}

TEST_CASE("one worker whose every contribution is non-finite: an error, whatever the policy") {
  for (const auto policy : {cocod::NonFinite::raise, cocod::NonFinite::skip}) {
    auto o = base;
    o.options.non_finite = policy;
    const Outcome out = run<cocod::LocalSGD>(o, 0, 3, 1000, 1);
    CHECK(out.errors[0].find("no finite consensus is left") != std::string::npos);
  }
}

TEST_CASE("max_skips must be >= 1") {
  cocod::Options o;
  o.max_skips = 0;
  CHECK_THROWS_WITH_AS(o.validate(1), "cocod::Options: max_skips must be >= 1 (got 0)", std::invalid_argument);
}

TEST_CASE("workers that take different numbers of steps are an error on every worker, not a silent average") {
  std::vector<std::string> errors(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Flaky model(40, 5, 3 + static_cast<std::uint64_t>(comm.rank()));
    cocod::Optimizer<Flaky, cocod::comm::Threads> opt{comm, {.period = 4, .batch_size = 4}};
    try {
      opt.optimize(model, cocod::Steps{comm.rank() == 0 ? std::size_t{10} : std::size_t{12}});
    } catch (const cocod::DistributedError& e) {
      errors[static_cast<std::size_t>(comm.rank())] = e.what();
    }
  });
  for (const auto& e : errors) {
    CAPTURE(e);
    CHECK(e.find("the workers are out of step: one reduction joined rank 0 at step 10 (finishing its run), rank 1 at step 12") != std::string::npos);
    CHECK(e == errors[0]);
  }
}

namespace {
/// Counts the skips in the report that on_end is shown.
struct SkipCounter {
  std::size_t* seen;
  void on_end(const cocod::Report& r) { *seen = static_cast<std::size_t>(r.total(&cocod::RoundStats::skipped)); }
};

/// Skip mode, a NaN on rank 1 at local steps [from, to) of a 40-step run (k = 4): the skips the
/// report counts and those on_end saw, on rank 0.
template <template <class...> class Algorithm>
std::pair<std::size_t, std::size_t> skips_of(std::size_t from, std::size_t to) {
  std::size_t counted = 0, seen = 0;
  cocod::comm::Threads::run(3, [&](cocod::comm::Threads comm) {
    Flaky model(40, 5, 60 + static_cast<std::uint64_t>(comm.rank()));
    model.rank = comm.rank();
    model.bad_rank = 1;
    model.nan_from = from;
    model.nan_to = to;
    auto o = base;
    o.options.non_finite = cocod::NonFinite::skip;
    auto opt = cocod_test::make<Algorithm<Flaky, cocod::comm::Threads>>(comm, o);
    std::size_t mine = 0;
    const auto report = opt.optimize(model, cocod::Steps{40}, SkipCounter{&mine});
    if (comm.rank() == 0) {
      counted = static_cast<std::size_t>(report.total(&cocod::RoundStats::skipped));
      seen = mine;
    }
  });
  return {counted, seen};
}
}  // namespace

TEST_CASE("skip: the event sink is told of each skip") {
  std::vector<cocod::Event> told;
  cocod::comm::Threads::run(3, [&](cocod::comm::Threads comm) {
    Flaky model(40, 5, 60 + static_cast<std::uint64_t>(comm.rank()));
    model.rank = comm.rank();
    model.bad_rank = 1;
    model.nan_from = 9;
    model.nan_to = 10;
    auto o = base;
    o.options.non_finite = cocod::NonFinite::skip;
    auto opt = cocod_test::make<cocod::LocalSGD<Flaky, cocod::comm::Threads>>(comm, o);
    if (comm.rank() == 0) opt.on_event([&](const cocod::Event& e) { told.push_back(e); });
    opt.optimize(model, cocod::Steps{40});
  });
  REQUIRE(told.size() == 1);
  CHECK(told[0].kind == cocod::Event::Kind::skipped);
  CHECK(told[0].round == 2);
  CHECK(told[0].message == "skipped a reduction: a worker's contribution was not finite, withheld (NonFinite::skip)");
}

TEST_CASE("skip: a contribution withheld in the final reduction is counted, in the report's last round that on_end sees") {
  // the last round (steps 36..39): CoCoD-SGD merges its in-flight average and withholds the NaN
  // from the final consensus; Pipe-SGD's last gradient lands in finish()
  for (const auto& run : std::vector<std::pair<std::string, std::pair<std::size_t, std::size_t>>>{
           {"cocod", skips_of<cocod::Optimizer>(37, 38)},
           {"ssgd", skips_of<cocod::SyncSGD>(39, 40)},
           {"local", skips_of<cocod::LocalSGD>(37, 38)},
           {"pipe", skips_of<cocod::PipeSGD>(39, 40)},
           {"overlap", skips_of<cocod::OverlapLocalSGD>(37, 38)}}) {
    CAPTURE(run.first);
    CHECK(run.second.first == 1);
    CHECK(run.second.second == 1);
  }
}

namespace {
/// 3 workers, rank 1's run `short_steps` long and the others' 10 (k = 4): what each one raised.
template <template <class...> class Algorithm>
std::vector<std::string> shorter_run(std::size_t short_steps) {
  std::vector<std::string> errors(3);
  cocod::comm::Threads::run(3, [&](cocod::comm::Threads comm) {
    Flaky model(40, 5, 3 + static_cast<std::uint64_t>(comm.rank()));
    Algorithm<Flaky, cocod::comm::Threads> opt{comm, {.period = 4, .batch_size = 4}};
    try {
      opt.optimize(model, cocod::Steps{comm.rank() == 1 ? short_steps : std::size_t{10}});
      errors[static_cast<std::size_t>(comm.rank())] = "returned";
    } catch (const cocod::DistributedError& e) {
      errors[static_cast<std::size_t>(comm.rank())] = e.what();
    }
  });
  return errors;
}
}  // namespace

TEST_CASE("a worker whose run is shorter by whole rounds fails with the others, the same DistributedError on every worker") {
  const std::vector<std::pair<const char*, std::vector<std::string>>> runs{
      {"cocod", shorter_run<cocod::Optimizer>(8)}, {"local", shorter_run<cocod::LocalSGD>(8)},
      {"overlap", shorter_run<cocod::OverlapLocalSGD>(8)}, {"ssgd 8", shorter_run<cocod::SyncSGD>(8)},
      {"ssgd 7", shorter_run<cocod::SyncSGD>(7)}, {"pipe 8", shorter_run<cocod::PipeSGD>(8)},
      {"pipe 9", shorter_run<cocod::PipeSGD>(9)}};
  for (const auto& run : runs) {
    CAPTURE(run.first);
    for (const auto& e : run.second) {
      CAPTURE(e);
      CHECK(e.rfind("cocod", 0) == 0);  // an error, not "returned"
      CHECK(e == run.second[0]);
    }
  }
  // where the collectives match, the error says which worker was finishing
  CHECK(runs[0].second[0].find("rank 1 at step 8 (finishing its run)") != std::string::npos);
}

TEST_CASE("a period that differs between workers is an error at begin() under every algorithm") {
  auto errors_of = [](auto tag) {
    using Opt = typename decltype(tag)::type;
    std::vector<std::string> errors(2);
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
      Flaky model(40, 5, 3 + static_cast<std::uint64_t>(comm.rank()));
      Opt opt{comm, {.period = comm.rank() == 0 ? std::size_t{4} : std::size_t{8}, .batch_size = 4}};
      try {
        opt.optimize(model, cocod::Steps{16});
      } catch (const cocod::DistributedError& e) {
        errors[static_cast<std::size_t>(comm.rank())] = e.what();
      }
    });
    return errors;
  };
  const std::string want = "cocod: the period differs between workers: rank 0 has 4; rank 1 has 8";
  CHECK(errors_of(std::type_identity<cocod::SyncSGD<Flaky, cocod::comm::Threads>>{}) == std::vector<std::string>(2, want));
  CHECK(errors_of(std::type_identity<cocod::PipeSGD<Flaky, cocod::comm::Threads>>{}) == std::vector<std::string>(2, want));
  CHECK(errors_of(std::type_identity<cocod::Optimizer<Flaky, cocod::comm::Threads>>{}) == std::vector<std::string>(2, want));
}

TEST_CASE("a NaN in the final average: NonFiniteError from finish(), and the optimizer is usable again") {
  for (const auto policy : {cocod::NonFinite::raise}) {
    std::vector<std::string> errors(2);
    std::vector<std::size_t> again(2);
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
      Flaky model(40, 5, 8 + static_cast<std::uint64_t>(comm.rank()));
      model.rank = comm.rank();
      model.bad_rank = 1;
      model.nan_from = 9;  // the last of 10 steps, in a partial round: the final average sees it
      model.nan_to = 10;
      auto o = base;
      o.options.non_finite = policy;
      cocod::LocalSGD<Flaky, cocod::comm::Threads> opt{comm, o.options, o.sgd};
      try {
        opt.optimize(model, cocod::Steps{10});
      } catch (const cocod::NonFiniteError& e) {
        errors[static_cast<std::size_t>(comm.rank())] = e.what();
      }
      again[static_cast<std::size_t>(comm.rank())] = opt.optimize(model, cocod::Steps{4}).steps;
    });
    for (const auto& e : errors) CHECK(e.find("rank 1 had a non-finite loss at step 9") != std::string::npos);
    CHECK(again == std::vector<std::size_t>{4, 4});
  }
}

namespace {
/// x stays 1 (a zero gradient); the loss of rank 1 is NaN at its step 2.
auto constant_model(int rank) {
  return cocod::make_model(std::vector<double>{1.0}, 8, [rank, step = std::size_t{0}](std::span<const std::size_t>, std::span<const double>, std::span<double> g) mutable {
    g[0] = 0.0;
    return rank == 1 && step++ == 2 ? std::numeric_limits<double>::quiet_NaN() : 1.0;
  });
}
}  // namespace

TEST_CASE("an algorithm that does not acknowledge a partial result: NonFiniteError on every worker, the model at the finite consensus") {
  for (const auto policy : {cocod::NonFinite::raise, cocod::NonFinite::skip}) {
    std::vector<std::string> errors(2);
    std::vector<double> x(2);
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
      auto model = constant_model(comm.rank());
      cocod::Trainer<cocod_test::Unaware, decltype(model), cocod::comm::Threads> opt{comm, {.period = 4, .batch_size = 2, .non_finite = policy}};
      try {
        opt.optimize(model, cocod::Steps{8});
      } catch (const cocod::NonFiniteError& e) {
        errors[static_cast<std::size_t>(comm.rank())] = e.what();
      }
      x[static_cast<std::size_t>(comm.rank())] = model.parameters()[0];
    });
    CHECK(errors[0] == errors[1]);
    CHECK(errors[0] == "cocod: a NaN or an infinity in round 0 (step 4): rank 1 had a non-finite loss at step 2, withheld "
                       "from the reduction; unaware did not acknowledge the partial result (Operations::acknowledge), so "
                       "the run stops");
    CHECK(x == std::vector<double>{1.0, 1.0});  // the average of the finite contributions, not 0.5
  }
}

namespace {
template <template <class...> class A>
void check_consensus_losses(const char* name, std::size_t period) {
  CAPTURE(name);
  std::vector<cocod::Report> reports(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    auto model = constant_model(comm.rank());
    A<decltype(model), cocod::comm::Threads> opt{comm, {.period = period, .batch_size = 2, .non_finite = cocod::NonFinite::skip}};
    reports[static_cast<std::size_t>(comm.rank())] = opt.optimize(model, cocod::Steps{12});
  });
  for (const auto& report : reports) {
    std::size_t losses = 0;
    for (const auto& round : report.rounds)
      if (round.consensus_loss_round != static_cast<std::size_t>(-1)) {
        CHECK(round.consensus_loss == 1.0);  // every finite loss is 1: their average, exactly
        ++losses;
      }
    CHECK(losses + 1 >= report.rounds.size());
    CHECK(report.total(&cocod::RoundStats::skipped) == 1);
  }
}
}  // namespace

TEST_CASE("a non-finite loss never reaches the consensus loss, whichever reduction carries it") {
  // Under S-SGD and Pipe-SGD the reduction that withholds the step's gradient comes before the
  // one that carries the round's mean loss: that worker sends no loss, and the others' average
  // is divided by their weights.
  check_consensus_losses<cocod::SyncSGD>("ssgd", 1);
  check_consensus_losses<cocod::PipeSGD>("pipe", 2);
  check_consensus_losses<cocod::PipeSGD>("pipe k=3", 3);
  check_consensus_losses<cocod::CoCoDSGD>("cocod", 2);
  check_consensus_losses<cocod::LocalSGD>("local", 2);
  check_consensus_losses<cocod::OverlapLocalSGD>("overlap", 2);
}

namespace {
/// x's only parameter is 1 (a zero gradient), except on rank 1 at its step 2: a NaN gradient,
/// so that its model, and everything it contributes, is NaN.
auto nan_gradient_model(int rank) {
  return cocod::make_model(std::vector<double>{1.0}, 8, [rank, step = std::size_t{0}](std::span<const std::size_t>, std::span<const double>,
                                                                                    std::span<double> g) mutable {
    g[0] = rank == 1 && step++ == 2 ? std::numeric_limits<double>::quiet_NaN() : 0.0;
    return 1.0;
  });
}

// Two exchanges reduced in one round end, both partial when a worker's model is NaN: each result
// is acknowledged on its own (Both = false: only the first is).
template <bool Both>
struct TwoExchanges {
  template <class Ops>
  class Rule {
    using T = typename Ops::scalar_type;
    using B = typename Ops::backend_type;
    using Span = typename Ops::span_type;

   public:
    static constexpr const char* name = "two exchanges";
    void begin(Ops& ops, Span x) {
      gradient_.resize(x.size());
      ops.prepare(a_, {.name = "a", .size = x.size()});
      ops.prepare(b_, {.name = "b", .size = x.size()});
    }
    void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr) {
      ops.gradient(batch, gradient_.span());
      ops.update(x, gradient_.span(), lr);
    }
    void end_round(Ops& ops, Span x) {
      scale(B{}, a_.model(), x, ops.weight());
      scale(B{}, b_.model(), x, ops.weight());
      const auto ra = ops.reduce(a_);
      const auto rb = ops.reduce(b_);
      copy(B{}, x, ra.consensus());
      ops.acknowledge(ra, cocod::Recovery::restarted);
      if (Both) ops.acknowledge(rb, cocod::Recovery::restarted);
      ops.acknowledge(ra, cocod::Recovery::restarted);  // twice is once
    }
    void finish(Ops& ops, Span x) { ops.average(x, a_); }
    template <class Archive>
    void serialize(Archive&) {}

   private:
    cocod::backend::buffer<B, T> gradient_;
    typename Ops::exchange_type a_, b_;
  };
};

template <bool Both>
std::vector<std::string> two_exchanges(std::vector<cocod::Report>& reports) {
  std::vector<std::string> errors(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    auto model = nan_gradient_model(comm.rank());
    cocod::Trainer<TwoExchanges<Both>::template Rule, decltype(model), cocod::comm::Threads> opt{
        comm, {.period = 4, .batch_size = 2, .non_finite = cocod::NonFinite::skip}};
    try {
      reports[static_cast<std::size_t>(comm.rank())] = opt.optimize(model, cocod::Steps{12});
    } catch (const cocod::NonFiniteError& e) {
      errors[static_cast<std::size_t>(comm.rank())] = e.what();
    }
  });
  return errors;
}
}  // namespace

TEST_CASE("two partial results in one hook are acknowledged one by one") {
  std::vector<cocod::Report> reports(2);
  CHECK(two_exchanges<true>(reports) == std::vector<std::string>(2));
  for (const auto& report : reports) {
    CHECK(report.rounds[0].skipped == 2);  // both reductions of round 0 skipped
    CHECK(report.total(&cocod::RoundStats::skipped) == 2);
  }
  for (const auto& e : two_exchanges<false>(reports))
    CHECK(e == "cocod: a NaN or an infinity in round 0 (step 4): rank 1 had a non-finite gradient or parameters at step 4, "
               "withheld from the reduction; two exchanges did not acknowledge the partial result (Operations::acknowledge), "
               "so the run stops");
}

TEST_CASE("the guard reads slots of any value (a corrupt checkpoint's) without an overflowing cast") {
  cocod::detail::Guard guard(cocod::NonFinite::skip, 3);
  guard.start(2);
  const std::vector<double> slots{7e194, 0.0, 1e300, std::numeric_limits<double>::quiet_NaN(), 0.5};
  guard.read(std::span<const double>(slots), false);  // (the sanitizer build reports a cast that overflows)
  CHECK(guard.partial());
}
