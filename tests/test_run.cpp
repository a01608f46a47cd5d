// The run's parts as a user meets them: batches outside the shard, workers that disagree on the
// parameter count, and the state each part exposes for saving and restoring.
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/checkpoint.hpp>

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "support.hpp"

namespace {
using Model = cocod_test::LeastSquares<double>;

/// Saves `from`'s run state (its serialize()) and restores it into `to`, through the archives
/// of a checkpoint file.
template <class Part>
void copy_state(Part& from, Part& to) {
  cocod::detail::SaveArchive save;
  save.file().section("header", cocod::checkpoint::FieldWriter{});
  cocod::detail::section(save, "part", [&](auto& a) { from.serialize(a); });
  const auto bytes = std::move(save).finish();
  const cocod::checkpoint::FileReader file(bytes, "state");
  cocod::detail::LoadArchive load(file);
  cocod::detail::section(load, "part", [&](auto& a) { to.serialize(a); });
}
}

TEST_CASE("a batch index outside the shard is refused, naming the index and the shard") {
  Model model(16, 3, 1);
  cocod::Optimizer<Model, cocod::comm::Local> opt{cocod::comm::Local{}, {.batch_size = 2}};
  opt.begin(model);
  const std::vector<std::size_t> bad{3, 16};
  CHECK_THROWS_WITH_AS(opt.step(model, bad),
                       "cocod: step(): batch index 16 is outside this worker's shard (rank 0 has 16 samples)",
                       std::out_of_range);
  CHECK(opt.steps_taken() == 0);  // nothing happened
  const std::vector<std::size_t> good{0, 15};
  CHECK_NOTHROW(opt.step(model, good));
  CHECK(opt.steps_taken() == 1);
  (void)opt.finish(model);
}

TEST_CASE("a batch larger than the shard spans passes, each sample once per pass") {
  cocod::BatchSampler sampler(4, 9, 0);
  std::vector<std::size_t> batch(10), counts(4, 0);
  sampler.next(batch);
  for (auto i : batch) ++counts[i];
  for (auto c : counts) CHECK((c == 2 || c == 3));  // two full passes and half of a third
  CHECK(sampler.passes() == 2);
}

TEST_CASE("the parameter-count error names every rank that differs and its count") {
  std::atomic<int> errors{0};
  CHECK_THROWS_AS(cocod::comm::Threads::run(4,
                                            [&](cocod::comm::Threads comm) {
                                              const std::size_t dim = comm.rank() == 1 ? 7 : comm.rank() == 3 ? 6 : 5;
                                              Model model(20, dim, 1);
                                              cocod::LocalSGD<Model, cocod::comm::Threads> opt{comm, {}};
                                              try {
                                                opt.begin(model);
                                              } catch (const cocod::DistributedError& e) {
                                                CHECK(std::string(e.what()) ==
                                                      "cocod: the parameter count differs between workers: rank 0 "
                                                      "has 5; rank 1 has 7; rank 3 has 6");
                                                ++errors;
                                                throw;
                                              }
                                            }),
                  cocod::DistributedError);
  CHECK(errors == 4);
}

TEST_CASE("the sampler's state restores the same batches") {
  cocod::BatchSampler a(10, 3, 1);
  std::vector<std::size_t> batch(4), x(4), y(4);
  a.next(batch);
  a.next(batch);
  cocod::BatchSampler b(10, 99, 5);  // another seed and rank: the state decides
  copy_state(a, b);
  a.next(x);
  a.next(x);
  b.next(y);
  b.next(y);
  CHECK(x == y);
  CHECK(a.passes() == b.passes());
}

TEST_CASE("a run's report, stop votes and counters are what the step-level API shows") {
  Model model(32, 3, 2);
  cocod::Optimizer<Model, cocod::comm::Local> opt{cocod::comm::Local{}, {.period = 3, .batch_size = 4}};
  opt.begin(model, cocod::Steps{7});
  CHECK(opt.info().total_steps == 7);
  std::size_t rounds = 0;
  for (int s = 0; s < 7; ++s) {
    (void)opt.step(model, opt.next_batch());
    if (opt.round_ended()) {
      ++rounds;
      CHECK(opt.last_round().steps == 3);
    }
  }
  CHECK(rounds == 2);
  CHECK_FALSE(opt.stop_agreed());
  const auto report = opt.finish(model);
  CHECK(report.steps == 7);
  REQUIRE(report.rounds.size() == 3);  // the last one partial
  CHECK(report.rounds.back().steps == 1);
}

TEST_CASE("the version macros agree with the CMake project's version") {
  CHECK(std::string(COCOD_VERSION_STRING) == COCOD_PROJECT_VERSION);
  CHECK(std::string(cocod::version_string) ==
        std::to_string(cocod::version_major) + "." + std::to_string(cocod::version_minor) + "." +
            std::to_string(cocod::version_patch));
}

namespace {
// An algorithm that breaks the exchange rule: it posts again while its collective is in flight.
template <class Ops>
class PostsTwice {
  using T = typename Ops::scalar_type;
  using Span = typename Ops::span_type;

 public:
  static constexpr const char* name = "posts twice";
  void begin(Ops& ops, Span x) {
    gradient_.resize(x.size());
    ops.prepare(send_, {.name = "send", .size = x.size()});
  }
  void step(Ops& ops, Span, std::span<const std::size_t> batch, T) {
    ops.post(send_);
    ops.gradient(batch, gradient_.span());
  }
  void end_round(Ops&, Span) {}
  void finish(Ops& ops, Span) {
    if (send_.in_flight()) (void)ops.wait(send_);
  }
  template <class Archive>
  void serialize(Archive&) {}

 private:
  cocod::backend::buffer<typename Ops::backend_type, T> gradient_;
  typename Ops::exchange_type send_;
};
}  // namespace

TEST_CASE("posting an exchange in flight is refused, and the failed run can be begun anew") {
  Model model(16, 3, 1);
  cocod::Trainer<PostsTwice, Model, cocod::comm::Local> opt{cocod::comm::Local{}, {.period = 4, .batch_size = 2}};
  opt.begin(model);
  (void)opt.step(model, opt.next_batch());
  CHECK_THROWS_WITH_AS(opt.step(model, opt.next_batch()),
                       "cocod: post() on exchange 'send', whose collective is in flight; wait() for it first",
                       std::logic_error);
  CHECK_NOTHROW(opt.begin(model));  // the failed run ended: nothing in flight, not running
  CHECK_THROWS_WITH_AS(opt.begin(model), "cocod: begin() called twice without finish()", std::logic_error);
}

TEST_CASE("a bad run length leaves no run behind") {
  Model model(16, 3, 1);
  cocod::Optimizer<Model, cocod::comm::Local> opt{cocod::comm::Local{}, {}};
  CHECK_THROWS_AS(opt.begin(model, cocod::Steps{0}), std::invalid_argument);
  CHECK_NOTHROW(opt.begin(model, cocod::Steps{2}));
  CHECK_THROWS_WITH_AS((void)opt.last_round(), "cocod: last_round() before a round ended", std::logic_error);
}

TEST_CASE("the measurement window's and the control slots' state restore what they send") {
  using Schedule = cocod::schedule::Adaptive<>;
  const Schedule schedule{.first = 1, .every = 2};
  cocod::schedule::Window<Schedule> a, b;
  a.start(3);
  b.start(3);
  a.add(schedule, {.round = 1, .compute_s = 0.5, .samples = 100, .comm_s = 0.2, .collectives = 1});
  copy_state(a, b);
  std::vector<double> sa(a.slots()), sb(b.slots());
  CHECK(a.write(std::span<double>(sa), 1));
  CHECK(b.write(std::span<double>(sb), 1));
  CHECK(sa == sb);
  CHECK(sa[1] == 0.005);  // seconds per sample of worker 1
  CHECK(sa[4] == 0.2);    // seconds per all-reduce of worker 1

  cocod::detail::Votes c, d;
  c.start(2);
  d.start(2);
  c.loss_ready(3, 1.5);
  c.vote();
  copy_state(c, d);
  std::vector<double> vc(4), vd(4), steps_c(2), steps_d(2);
  const auto tc = c.write(std::span<double>(vc), std::span<double>(steps_c), 0.5, true, true, 1, 7, false);
  const auto td = d.write(std::span<double>(vd), std::span<double>(steps_d), 0.5, true, true, 1, 7, false);
  CHECK(tc == td);
  CHECK(vc == vd);
  CHECK(vc[0] == 0.75);  // w * the ready loss
  CHECK(steps_c == steps_d);
}

namespace {
/// LeastSquares with two buffers that follow the data: every step adds the batch's first index
/// (and its rank) into them, so each worker's differ until cocod averages them.
struct Buffered : Model {
  std::vector<double> stats;
  int rank;
  Buffered(std::size_t samples, int r, std::size_t buffers = 2) : Model(samples, 3, 1), stats(buffers, 0.0), rank(r) {
    for (double& s : stats) s = 10.0 * r;  // differ at the start: begin() broadcasts rank 0's
  }
  std::span<double> buffers() { return stats; }
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<double> g) {
    for (std::size_t i = 0; i < stats.size(); ++i) stats[i] += static_cast<double>(batch[0] + i) + 0.25 * rank;
    return Model::loss_and_gradient(batch, g);
  }
};
static_assert(cocod::BufferedModel<Buffered>);
static_assert(!cocod::BufferedModel<Model>);
struct BuffersByValue : Model {  // cocod would average a copy: not a BufferedModel
  using Model::Model;
  std::vector<double> buffers() { return {}; }
};
static_assert(!cocod::BufferedModel<BuffersByValue>);
}  // namespace

TEST_CASE("a model's buffers start as rank 0's and are the weighted average at every round's end") {
  // Unequal shards and batch sizes: weights 1/3 and 2/3 (proportional batches).
  const std::size_t period = 3, steps = 8;  // two full rounds and a partial one of 2 steps
  std::vector<std::vector<std::vector<double>>> seen(2);  // [rank][round] the buffers after it
  std::vector<std::vector<double>> final(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    const int r = comm.rank();
    Buffered model(r == 0 ? 30 : 60, r);
    cocod::LocalSGD<Buffered, cocod::comm::Threads> opt{
        comm, {.learning_rate = 0.01, .period = period, .batch_size = r == 0 ? 2u : 4u}};
    opt.begin(model, cocod::Steps{steps});
    CHECK(model.stats == std::vector<double>(2, 0.0));  // rank 0's
    for (std::size_t s = 0; s < steps; ++s) {
      (void)opt.step(model, opt.next_batch());
      if (opt.round_ended()) seen[static_cast<std::size_t>(r)].push_back(model.stats);
    }
    (void)opt.finish(model);
    final[static_cast<std::size_t>(r)] = model.stats;
  });
  REQUIRE(seen[0].size() == 2);
  CHECK(seen[0] == seen[1]);  // the same on both workers after each round
  CHECK(final[0] == final[1]);
  CHECK(final[0] != seen[0].back());  // the partial round was averaged too
}

TEST_CASE("the average of the buffers is w_0 b_0 + w_1 b_1 in rank order, to the bit") {
  std::vector<std::vector<double>> before(2), after(2);
  double weight[2]{};
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    Buffered model(r == 0 ? 30 : 60, comm.rank());
    cocod::LocalSGD<Buffered, cocod::comm::Threads> opt{comm, {.period = 2, .batch_size = r == 0 ? 2u : 4u}};
    opt.begin(model, cocod::Steps{2});
    weight[r] = opt.info().weight;
    (void)opt.step(model, opt.next_batch());
    // Before the round's last step: predict what the step adds, then compare after it.
    auto batch = opt.next_batch();
    before[r] = model.stats;
    for (std::size_t i = 0; i < 2; ++i) before[r][i] += static_cast<double>(batch[0] + i) + 0.25 * comm.rank();
    (void)opt.step(model, batch);
    REQUIRE(opt.round_ended());
    after[r] = model.stats;
    (void)opt.finish(model);
  });
  CHECK(weight[0] == doctest::Approx(1.0 / 3.0));
  for (std::size_t i = 0; i < 2; ++i) {
    const double expected = weight[0] * before[0][i] + weight[1] * before[1][i];
    CHECK(after[0][i] == expected);
    CHECK(after[1][i] == expected);
  }
}

TEST_CASE("workers whose models have different buffer sizes are refused at begin(), on every worker") {
  std::atomic<int> errors{0};
  CHECK_THROWS_AS(cocod::comm::Threads::run(3,
                                            [&](cocod::comm::Threads comm) {
                                              Buffered model(20, comm.rank(), comm.rank() == 2 ? 3 : 2);
                                              cocod::CoCoDSGD<Buffered, cocod::comm::Threads> opt{comm, {}};
                                              try {
                                                opt.begin(model);
                                              } catch (const cocod::DistributedError& e) {
                                                CHECK(std::string(e.what()).starts_with(
                                                    "cocod: the workers' models have different numbers of buffer "
                                                    "elements (buffers()): rank "));
                                                ++errors;
                                                throw;
                                              }
                                            }),
                  cocod::DistributedError);
  CHECK(errors == 3);
}

TEST_CASE("a NaN in one worker's buffers is a NonFiniteError on every worker at the round's end, naming it, the buffers at the finite consensus") {
  std::atomic<int> errors{0};
  CHECK_THROWS_AS(cocod::comm::Threads::run(2,
                                            [&](cocod::comm::Threads comm) {
                                              Buffered model(20, comm.rank());
                                              cocod::LocalSGD<Buffered, cocod::comm::Threads> opt{comm, {.period = 2}};
                                              opt.begin(model, cocod::Steps{4});
                                              (void)opt.step(model, opt.next_batch());
                                              if (comm.rank() == 1) model.stats[1] = std::nan("");
                                              try {
                                                (void)opt.step(model, opt.next_batch());
                                              } catch (const cocod::NonFiniteError& e) {
                                                CHECK(std::string(e.what()) ==
                                                      "cocod: a NaN or an infinity in round 0 (step 2): the buffers() of rank 1 were "
                                                      "not finite, withheld from their average; the buffers are left at the "
                                                      "consensus of the finite ones");
                                                for (const double v : model.stats) CHECK(std::isfinite(v));
                                                ++errors;
                                                throw;
                                              }
                                            }),
                  cocod::NonFiniteError);
  CHECK(errors == 2);
}

TEST_CASE("skip: buffers that are not finite at every round's end are skipped, counted, told, and end the run after max_skips") {
  std::vector<std::string> errors(2);
  std::vector<std::size_t> told(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    Buffered model(20, comm.rank());
    cocod::LocalSGD<Buffered, cocod::comm::Threads> opt{comm, {.period = 2, .non_finite = cocod::NonFinite::skip, .max_skips = 3}};
    opt.on_event([&](const cocod::Event& e) { told[r] += e.kind == cocod::Event::Kind::skipped; });
    opt.begin(model, cocod::Steps{20});
    try {
      for (int s = 0; s < 20; ++s) {
        if (comm.rank() == 1) model.stats[0] = std::nan("");  // a NaN in its statistics at every step
        (void)opt.step(model, opt.next_batch());
      }
    } catch (const cocod::NonFiniteError& e) {
      errors[r] = e.what();
    }
  });
  for (const auto& e : errors) {
    CAPTURE(e);
    CHECK(e == errors[0]);
    CHECK(e.find("the buffers() of rank 1 were not finite, withheld from their average; 3 buffer averages in a row were skipped "
                 "(Options::max_skips = 3)") != std::string::npos);
  }
  CHECK(told == std::vector<std::size_t>{2, 2});  // the first two skips, told; the third ends the run
}

namespace {
// One-shot averaging: local SGD alone, and one average at the end. No round reduces an
// exchange, so the run reduces the control slots itself at each round's end.
template <class Ops>
class OneShot {
  using T = typename Ops::scalar_type;
  using Span = typename Ops::span_type;

 public:
  static constexpr const char* name = "one-shot averaging";
  void begin(Ops& ops, Span x) {
    gradient_.resize(x.size());
    ops.prepare(send_, {.name = "send", .size = x.size()});
  }
  void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr) {
    ops.gradient(batch, gradient_.span());
    ops.update(x, gradient_.span(), lr);
  }
  void end_round(Ops&, Span) {}
  void finish(Ops& ops, Span x) { ops.average(x, send_); }
  template <class Archive>
  void serialize(Archive&) {}

 private:
  cocod::backend::buffer<typename Ops::backend_type, T> gradient_;
  typename Ops::exchange_type send_;
};
/// Asks to stop at the end of round `at`.
struct StopAt {
  std::size_t at = 0;
  bool on_round(const cocod::RoundStats& r) { return r.round == at; }
};
}  // namespace

TEST_CASE("an algorithm that reduces no exchange in a round still gets consensus losses, votes and stops") {
  std::vector<cocod::Report> reports(2);
  std::vector<std::vector<double>> x(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Model model(40, 3, 7 + static_cast<std::uint64_t>(comm.rank()));
    cocod::Trainer<OneShot, Model, cocod::comm::Threads> opt{comm, {.learning_rate = 0.05, .period = 4, .batch_size = 4}};
    const auto r = static_cast<std::size_t>(comm.rank());
    reports[r] = opt.optimize(model, cocod::Steps{320}, StopAt{3});
    x[r] = model.x;
  });
  for (const auto& report : reports) {
    CHECK(report.stopped_early);
    CHECK(report.steps == 20);  // the vote of round 3 reaches every worker with round 4's slots
    CHECK(std::isfinite(report.final_loss()));
    CHECK(report.rounds.back().consensus_loss_round == 4);
  }
  CHECK(x[0] == x[1]);  // the consensus at the end
}

namespace {
/// x stays 1 (a zero gradient); the loss of rank 1 is NaN at its step 2.
auto nan_loss_model(int rank) {
  return cocod::make_model(std::vector<double>{1.0}, 8, [rank, step = std::size_t{0}](std::span<const std::size_t>, std::span<const double>,
                                                                                    std::span<double> g) mutable {
    g[0] = 0.0;
    return rank == 1 && step++ == 2 ? std::numeric_limits<double>::quiet_NaN() : 1.0;
  });
}
}  // namespace

TEST_CASE("an algorithm that reduces no exchange in a round: a NaN loss is raised at the round's end, or skipped in finish") {
  SUBCASE("raise: the same NonFiniteError on every worker, from the round's control reduction") {
    std::vector<std::string> errors(2);
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
      auto model = nan_loss_model(comm.rank());
      cocod::Trainer<OneShot, decltype(model), cocod::comm::Threads> opt{comm, {.period = 4, .batch_size = 2}};
      try {
        (void)opt.optimize(model, cocod::Steps{12});
      } catch (const cocod::NonFiniteError& e) {
        errors[static_cast<std::size_t>(comm.rank())] = e.what();
      }
    });
    for (const auto& e : errors)
      CHECK(e == "cocod: a NaN or an infinity in round 0 (step 4): rank 1 had a non-finite loss at step 2, withheld from the "
                 "reduction; found by the round's control reduction (one-shot averaging reduced no exchange in the round); "
                 "the models are left as they are");
  }
  SUBCASE("skip: the finding waits for the final average, which leaves the consensus of the finite models") {
    std::vector<cocod::Report> reports(2);
    std::vector<double> x(2);
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
      auto model = nan_loss_model(comm.rank());
      cocod::Trainer<OneShot, decltype(model), cocod::comm::Threads> opt{
          comm, {.period = 4, .batch_size = 2, .non_finite = cocod::NonFinite::skip}};
      const auto r = static_cast<std::size_t>(comm.rank());
      reports[r] = opt.optimize(model, cocod::Steps{12});
      x[r] = model.parameters()[0];
    });
    CHECK(x == std::vector<double>{1.0, 1.0});
    for (const auto& report : reports) {
      CHECK(report.total(&cocod::RoundStats::skipped) == 1);  // the final average's, counted in the last round
      CHECK(report.rounds.back().skipped == 1);
      for (const auto& round : report.rounds)
        if (round.consensus_loss_round != static_cast<std::size_t>(-1)) CHECK(round.consensus_loss == 1.0);
    }
  }
}

namespace {
// The misuses of the operations a rule of one's own can make, each refused naming the exchange.
enum class Misuse { average_size, no_pieces, model_too_small, piece_outside, in_flight_at_round_end, earlier_run, wait_idle };

template <Misuse M>
struct Misusing {
  template <class Ops>
  class Rule {
    using T = typename Ops::scalar_type;
    using Span = typename Ops::span_type;

   public:
    static constexpr const char* name = "misuse";
    void begin(Ops& ops, Span x) {
      gradient_.resize(x.size());
      if constexpr (M == Misuse::no_pieces) ops.prepare(send_, {.name = "send", .size = x.size(), .pieces = 0});
      if constexpr (M == Misuse::model_too_small) ops.prepare(send_, {.name = "send", .size = x.size(), .model = 1});
      if constexpr (M == Misuse::piece_outside) {
        ops.prepare(send_, {.name = "send", .size = 1, .model = x.size(), .pieces = 2});
        send_.use(cocod::Piece{.offset = 1, .size = 1, .index = 2});
      }
      if (M == Misuse::earlier_run && prepared_) return;  // (prepares only in its first run)
      ops.prepare(send_, {.name = "send", .size = x.size()});
      prepared_ = true;
    }
    void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr) {
      ops.gradient(batch, gradient_.span());
      ops.update(x, gradient_.span(), lr);
      if constexpr (M == Misuse::in_flight_at_round_end)
        if (!send_.in_flight()) ops.post(send_);
      if constexpr (M == Misuse::wait_idle) (void)ops.wait(send_);
    }
    void end_round(Ops& ops, Span x) {
      if constexpr (M == Misuse::average_size) ops.average(x.first(1), send_);
      if constexpr (M == Misuse::earlier_run) ops.average(x, send_);
    }
    void finish(Ops& ops, Span x) {
      if (send_.in_flight()) (void)ops.wait(send_);
      ops.average(x, send_);
    }
    template <class Archive>
    void serialize(Archive&) {}

   private:
    cocod::backend::buffer<typename Ops::backend_type, T> gradient_;
    typename Ops::exchange_type send_;
    bool prepared_ = false;
  };
};

template <Misuse M>
std::string misuse_error(std::size_t runs = 1) {
  Model model(16, 3, 1);
  cocod::Trainer<Misusing<M>::template Rule, Model, cocod::comm::Local> opt{cocod::comm::Local{}, {.period = 2, .batch_size = 2}};
  try {
    for (std::size_t r = 0; r < runs; ++r) (void)opt.optimize(model, cocod::Steps{4});
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("a rule's misuse of an exchange is a logic_error naming the exchange and what is wrong") {
  CHECK(misuse_error<Misuse::average_size>() == "cocod: average() of 1 values through exchange 'send', whose model part has 3");
  CHECK(misuse_error<Misuse::no_pieces>() == "cocod: prepare(): exchange 'send': ExchangeSpec::pieces must be at least 1");
  CHECK(misuse_error<Misuse::model_too_small>() == "cocod: prepare(): exchange 'send': ExchangeSpec::model (1) is smaller than its size (3)");
  CHECK(misuse_error<Misuse::piece_outside>() ==
        "cocod: use() on exchange 'send': piece 2 of 1 values at offset 1 does not fit (its size 1, model 3, pieces 2)");
  CHECK(misuse_error<Misuse::in_flight_at_round_end>() ==
        "cocod: exchange 'send' is in flight at the end of a round: wait() for it in end_round, or prepare it with "
        ".in_flight_between_rounds = true");
  CHECK(misuse_error<Misuse::earlier_run>(2) == "cocod: average() on exchange 'send', which was not prepare()d for this run");
  CHECK(misuse_error<Misuse::wait_idle>() == "cocod: wait() on exchange 'send', which has no collective in flight; post() it first");
}

namespace {
// Records the round its operations name in each step and at each round's end.
struct Rounds {
  std::vector<std::size_t> steps, ends;
};
struct RoundsSeen {  // (the rule's setting: where it records)
  static constexpr const char* name = "RoundsSeen";
  Rounds* log = nullptr;
  template <class Archive>
  void serialize(Archive&) {}
};
template <class Ops>
class RoundLog {
  using T = typename Ops::scalar_type;
  using Span = typename Ops::span_type;

 public:
  static constexpr const char* name = "round log";
  using settings = std::tuple<RoundsSeen>;
  explicit RoundLog(const settings& s) : log_(std::get<0>(s).log) {}
  void begin(Ops& ops, Span x) { inner_.begin(ops, x); }
  void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr) {
    log_->steps.push_back(ops.round());
    inner_.step(ops, x, batch, lr);
  }
  void end_round(Ops& ops, Span x) {
    log_->ends.push_back(ops.round());
    inner_.end_round(ops, x);
  }
  void finish(Ops& ops, Span x) { inner_.finish(ops, x); }
  template <class Archive>
  void serialize(Archive& a) {
    inner_.serialize(a);
  }

 private:
  Rounds* log_;
  OneShot<Ops> inner_;
};
}  // namespace

TEST_CASE("a rule's operations name the current round, counted from 0, in its steps and at its round ends") {
  Rounds log;
  Model model(40, 3, 7);
  cocod::Trainer<RoundLog, Model, cocod::comm::Local> opt{cocod::comm::Local{}, {.period = 3, .batch_size = 2}, RoundsSeen{.log = &log}};
  (void)opt.optimize(model, cocod::Steps{8});  // rounds 0 and 1 of 3 steps, a last partial round 2 of 2
  CHECK(log.steps == std::vector<std::size_t>{0, 0, 0, 1, 1, 1, 2, 2});
  CHECK(log.ends == std::vector<std::size_t>{0, 1});  // (no end_round for a last partial round)
}
