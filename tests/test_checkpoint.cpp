// Checkpoints: a run interrupted at a round and resumed equals the uninterrupted run bit for bit
// (every algorithm, momentum and a cosine schedule, over comm::Threads); saving does not change
// a run; bad checkpoints give one clear error on every worker and overwrite nothing; an elastic
// resume continues from the consensus; a model's own state travels; the store keeps the last K.
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/checkpoint.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "support.hpp"

namespace fs = std::filesystem;

namespace {

using Model = cocod_test::LeastSquares<double>;
using Schedule = cocod::schedule::Fixed<cocod::lr::Cosine>;
const cocod_test::Setup options{{.learning_rate = 0.05, .period = 3, .batch_size = 4, .seed = 11}, {.momentum = 0.9}};
constexpr int workers = 3;
constexpr std::size_t total_steps = 22;  // 7 rounds of 3 and a partial one

/// A fresh directory under the system's temporary one.
fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("cocod-test-checkpoint-" + name);
  fs::remove_all(p);
  return p;
}

struct Outcome {
  std::vector<std::vector<double>> x;  // per worker, after finish
  std::vector<double> losses, consensus;
  std::size_t steps = 0, rounds = 0;
  std::vector<std::size_t> periods;  // each round's
  /// Bit for bit (a NaN consensus before the first one arrived included).
  bool operator==(const Outcome& o) const {
    auto same = [](const std::vector<double>& a, const std::vector<double>& b) {
      return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
    };
    for (std::size_t r = 0; r < x.size(); ++r)
      if (r >= o.x.size() || !same(x[r], o.x[r])) return false;
    return x.size() == o.x.size() && same(losses, o.losses) && same(consensus, o.consensus) && steps == o.steps &&
           rounds == o.rounds && periods == o.periods;
  }
};

Model model_of(int rank) { return Model(40, 6, 900 + static_cast<std::uint64_t>(rank)); }

template <class Opt>
void keep(Outcome& out, std::mutex& m, int rank, Model& model, const cocod::Report& report) {
  std::lock_guard lock(m);
  out.x[static_cast<std::size_t>(rank)] = model.x;
  if (rank != 0) return;
  for (const auto& r : report.rounds) {
    out.losses.push_back(r.loss);
    out.consensus.push_back(r.consensus_loss);
    out.periods.push_back(r.period);
  }
  out.steps = report.steps;
  out.rounds = report.rounds.size();
}

/// The run from start to end; with `store`, saving every round.
template <template <class...> class Algorithm, class S = Schedule>
Outcome whole_run(const cocod::Checkpoints* store = nullptr, const cocod_test::Setup& options = ::options, const S& schedule = {}) {
  Outcome out;
  out.x.resize(workers);
  std::mutex m;
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    using Opt = Algorithm<Model, cocod::comm::Threads, S>;
    Model model = model_of(comm.rank());
    auto opt = cocod_test::make<Opt>(comm, options, schedule);
    opt.begin(model, cocod::Steps{total_steps});
    if (store) opt.save(model, *store);
    while (opt.steps_taken() < total_steps) {
      opt.step(model, opt.next_batch());
      if (store && opt.round_ended()) opt.save(model, *store);
    }
    keep<Opt>(out, m, comm.rank(), model, opt.finish(model));
  });
  return out;
}

/// Runs until `round` rounds have ended, saves, and stops there (as a crash would).
template <template <class...> class Algorithm, class S = Schedule>
void interrupted_run(const cocod::Checkpoints& store, std::size_t round, const cocod_test::Setup& options = ::options,
                     const S& schedule = {}) {
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    Model model = model_of(comm.rank());
    auto opt = cocod_test::make<Algorithm<Model, cocod::comm::Threads, S>>(comm, options, schedule);
    opt.begin(model, cocod::Steps{total_steps});
    for (std::size_t ended = 0; ended < round;) {
      opt.step(model, opt.next_batch());
      ended += opt.round_ended();
    }
    opt.save(model, store);
    // a few more steps that the resumed run will redo, then the run is gone
    for (int i = 0; i < 2 && opt.steps_taken() < total_steps; ++i) opt.step(model, opt.next_batch());
  });
}

template <template <class...> class Algorithm, class S = Schedule>
Outcome resumed_run(const cocod::Checkpoints& store, const cocod_test::Setup& options = ::options, const S& schedule = {}) {
  Outcome out;
  out.x.resize(workers);
  std::mutex m;
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    using Opt = Algorithm<Model, cocod::comm::Threads, S>;
    Model model(40, 6, 900 + static_cast<std::uint64_t>(comm.rank()));
    for (auto& v : model.x) v = 123.0;  // whatever the model held: the checkpoint's replaces it
    auto opt = cocod_test::make<Opt>(comm, options, schedule);
    opt.resume_from(store);
    const cocod::Report report = opt.optimize(model, cocod::Steps{total_steps});
    keep<Opt>(out, m, comm.rank(), model, report);
  });
  return out;
}

/// Resumes at rounds 0, 3 and 7 (or at `rounds`) and checks that every resumed run ends as the
/// whole one, bit for bit.
template <template <class...> class Algorithm, class S = Schedule>
void check_bitwise_resume(const char* name, const cocod_test::Setup& options = ::options, const S& schedule = {},
                          const std::vector<std::size_t>& rounds = {0, 3, 7}) {
  CAPTURE(name);
  const Outcome whole = whole_run<Algorithm>(nullptr, options, schedule);
  REQUIRE(whole.steps == total_steps);
  {
    const cocod::Checkpoints store(scratch(std::string(name) + "-every"));
    CHECK(whole_run<Algorithm>(&store, options, schedule) == whole);  // saving changes nothing
  }
  for (const std::size_t round : rounds) {
    CAPTURE(round);
    const cocod::Checkpoints store(scratch(std::string(name) + "-" + std::to_string(round)));
    interrupted_run<Algorithm>(store, round, options, schedule);
    REQUIRE(store.rounds() == std::vector<std::size_t>{round});
    const Outcome resumed = resumed_run<Algorithm>(store, options, schedule);
    CHECK(resumed.x == whole.x);
    CHECK(resumed.losses == whole.losses);
    CHECK(resumed.steps == whole.steps);
    CHECK(resumed.rounds == whole.rounds);
    CHECK(resumed == whole);  // and the consensus losses, NaN before the first one included
  }
}

/// Every worker's exception message from resuming `store` (empty: it resumed).
template <class Make>
std::vector<std::string> resume_errors(const cocod::Checkpoints& store, int n, Make make,
                                       cocod::ResumeOptions ro = {}, cocod_test::Setup o = options) {
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  cocod::comm::Threads::run(n, [&](cocod::comm::Threads comm) {
    auto model = make(comm.rank());
    auto opt = cocod_test::make<cocod::Optimizer<decltype(model), cocod::comm::Threads, Schedule>>(comm, o);
    try {
      (void)opt.resume(model, store, cocod::Steps{total_steps}, ro);
    } catch (const cocod::CheckpointError& e) {
      errors[static_cast<std::size_t>(comm.rank())] = e.what();
    }
  });
  return errors;
}

/// What each worker raises resuming `store` with the schedule `sched` and a run of `steps` steps.
template <class Sched>
std::vector<std::string> resume_errors_with(const cocod::Checkpoints& store, Sched sched, std::size_t steps,
                                            cocod_test::Setup o = options) {
  std::vector<std::string> errors(static_cast<std::size_t>(workers));
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    auto model = model_of(comm.rank());
    auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, Sched>>(comm, o, sched);
    try {
      (void)opt.resume(model, store, cocod::Steps{steps});
    } catch (const cocod::CheckpointError& e) {
      errors[static_cast<std::size_t>(comm.rank())] = e.what();
    }
  });
  return errors;
}

/// The bytes of every file under `dir`, to prove that nothing was written.
std::vector<std::pair<std::string, std::string>> snapshot(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) {
      std::ifstream in(e.path(), std::ios::binary);
      files.emplace_back(e.path().string(), std::string(std::istreambuf_iterator<char>(in), {}));
    }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("CRC-32 is zlib's, eight bytes a step or one, from any offset and continued") {
  const std::string check = "123456789";
  CHECK(cocod::checkpoint::crc32(check) == 0xCBF43926u);  // the standard check value
  CHECK(cocod::checkpoint::crc32(std::string_view{}) == 0u);
  // Against one byte a step, the plain table form: every length 0..40 and offset 0..7.
  const auto bytewise = [](std::span<const std::byte> data, std::uint32_t crc) {
    crc = ~crc;
    for (const std::byte b : data) {
      crc ^= static_cast<std::uint32_t>(b);
      for (int k = 0; k < 8; ++k) crc = (crc & 1) ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
    }
    return ~crc;
  };
  std::vector<std::byte> data(48);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>((i * 167 + 13) & 0xFF);
  for (std::size_t offset = 0; offset < 8; ++offset)
    for (std::size_t length = 0; offset + length <= 40; ++length) {
      const std::span<const std::byte> part(data.data() + offset, length);
      CHECK(cocod::checkpoint::crc32(part) == bytewise(part, 0));
      CHECK(cocod::checkpoint::crc32(part, 0x12345678u) == bytewise(part, 0x12345678u));  // continued
    }
}

TEST_CASE("a run interrupted at the start, the middle or the last round resumes bit for bit: CoCoD-SGD") {
  check_bitwise_resume<cocod::Optimizer>("cocod");
}
TEST_CASE("a run interrupted at the start, the middle or the last round resumes bit for bit: S-SGD") {
  check_bitwise_resume<cocod::SyncSGD>("ssgd");
}
TEST_CASE("a run interrupted at the start, the middle or the last round resumes bit for bit: Local-SGD") {
  check_bitwise_resume<cocod::LocalSGD>("local");
}
TEST_CASE("a run interrupted at the start, the middle or the last round resumes bit for bit: Pipe-SGD") {
  check_bitwise_resume<cocod::PipeSGD>("pipe");
}

TEST_CASE("the family's state resumes bit for bit: outer momentum, residuals, fragments, the anchor") {
  auto o = options;
  o.outer = cocod::Outer::diloco();
  o.compress = {cocod::Compression::int8, 4};
  o.fragments.count = 3;
  check_bitwise_resume<cocod::Optimizer>("cocod-family", o);
  o.fragments.count = 1;
  o.compress.format = cocod::Compression::bf16;
  check_bitwise_resume<cocod::LocalSGD>("local-family", o);
  auto overlap = options;
  overlap.pull.anchor_momentum = 0.7;
  overlap.compress.format = cocod::Compression::fp16;
  check_bitwise_resume<cocod::OverlapLocalSGD>("overlap", overlap);
  check_bitwise_resume<cocod::OverlapLocalSGD>("overlap-plain");
}

TEST_CASE("DiLoCo with delayed outer gradients resumes bit for bit: eager and delayed, with int8 and fragments") {
  auto o = options;
  check_bitwise_resume<cocod::DelayedDiLoCo>("delayed-eager", o);
  o.delay.start = cocod::OuterStart::delayed;
  check_bitwise_resume<cocod::DelayedDiLoCo>("delayed-naive", o);
  o.delay.start = cocod::OuterStart::eager;
  o.outer = cocod::Outer::slowmo();
  o.compress = {cocod::Compression::int8, 4};
  o.fragments.count = 4;  // of unequal sizes: the fragment saved is the one the next round posts
  check_bitwise_resume<cocod::DelayedDiLoCo>("delayed-eager-family", o);
}

TEST_CASE("CoCoD-SGD with an overlap depth resumes bit for bit: its snapshot is retaken after step k - tau") {
  auto o = options;
  o.depth.steps = 1;
  check_bitwise_resume<cocod::Optimizer>("cocod-depth1", o);
  o.depth.steps = 0;
  check_bitwise_resume<cocod::Optimizer>("cocod-depth0", o);
  o.depth.steps = 2;
  o.outer = cocod::Outer::diloco();
  o.compress = {cocod::Compression::int8, 4};
  o.fragments.count = 4;  // of unequal sizes (1, 2, 1, 2): the fragment saved is the next one's
  check_bitwise_resume<cocod::Optimizer>("cocod-depth2-family", o);
}

TEST_CASE("CoCoD-SGD with an automatic overlap depth resumes bit for bit at every round, across whole and partial overlaps") {
  // (period, hiding steps), one re-plan per round: whole rounds (unmeasured, 2 of 2, 3 of 3)
  // and partial ones (tau 1 of 3, 1 of 2), so checkpoints fall on both sides of each crossing
  const cocod_test::Scripted schedule{{{2, 0}, {3, 1}, {2, 2}, {3, 3}, {2, 1}}};
  auto o = options;
  o.depth.steps = cocod::OverlapDepth::automatic;
  const std::vector<std::size_t> every{0, 1, 2, 3, 4, 5, 6, 7};
  const auto periods = whole_run<cocod::Optimizer>(nullptr, o, schedule).periods;
  REQUIRE(periods.size() >= 8);
  CHECK(std::count(periods.begin(), periods.begin() + 8, std::size_t{3}) >= 2);  // re-planned within the rounds resumed at
  CHECK(std::count(periods.begin(), periods.begin() + 8, std::size_t{2}) >= 2);
  check_bitwise_resume<cocod::Optimizer>("cocod-auto", o, schedule, every);
  o.outer = cocod::Outer::diloco();
  o.compress = {cocod::Compression::int8, 4};
  o.fragments.count = 4;
  check_bitwise_resume<cocod::Optimizer>("cocod-auto-family", o, schedule, every);
}

template <class M, class C, class S>
using CoCoDClippedAdamW = cocod::CoCoDSGD<M, C, S, cocod::update::ClipGradNorm<cocod::update::AdamW>>;
template <class M, class C, class S>
using LocalAdam = cocod::LocalSGD<M, C, S, cocod::update::Adam>;

TEST_CASE("Adam and AdamW resume bit for bit: their moments and step counts are in the checkpoint") {
  auto o = options;
  o.adamw.weight_decay = 0.1;
  o.adam.weight_decay = 1e-3;
  check_bitwise_resume<CoCoDClippedAdamW>("cocod-adamw-clipped", o);
  check_bitwise_resume<LocalAdam>("local-adam", o);
  // another update rule, or other settings of it, is refused by name
  const cocod::Checkpoints store(scratch("update-mismatch"));
  interrupted_run<CoCoDClippedAdamW>(store, 2, o);
  auto errors = [&](auto rule, const cocod_test::Setup& setup) {
    std::vector<std::string> out(static_cast<std::size_t>(workers));
    cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
      auto model = model_of(comm.rank());
      cocod::CoCoDSGD<Model, cocod::comm::Threads, Schedule, decltype(rule)> opt(comm, setup.options, rule);
      try {
        (void)opt.resume(model, store, cocod::Steps{total_steps});
      } catch (const cocod::CheckpointError& e) {
        out[static_cast<std::size_t>(comm.rank())] = e.what();
      }
    });
    return out;
  };
  auto expect = [](const std::vector<std::string>& got, const std::string& message) {
    CAPTURE(message);
    for (const auto& e : got) {
      CAPTURE(e);
      CHECK(e.find(message) != std::string::npos);
    }
  };
  using Clipped = cocod::update::ClipGradNorm<cocod::update::AdamW>;
  for (const auto& e : errors(Clipped{.max_norm = 1.0, .inner = o.adamw}, o)) CHECK(e.empty());  // the same: it resumes
  expect(errors(Clipped{.max_norm = 2.0, .inner = o.adamw}, o),
         "update::ClipGradNorm::max_norm differs (checkpoint: 1, this run: 2)");
  expect(errors(Clipped{.max_norm = 1.0, .inner = {.weight_decay = 0.01}}, o),
         "update::ClipGradNorm::weight_decay differs (checkpoint: 0.1, this run: 0.01)");
  expect(errors(cocod::update::ClipGradNorm<cocod::update::Adam>{.max_norm = 1.0, .inner = o.adam}, o),
         "update::ClipGradNorm::inner differs (checkpoint: update::AdamW, this run: update::Adam)");
  expect(errors(o.adamw, o), "does not fit this run: the checkpoint's run has update::ClipGradNorm where this run has update::AdamW");
  expect(errors(cocod::update::Sgd{}, o), "the checkpoint's run has update::ClipGradNorm where this run has update::Sgd");
}

TEST_CASE("a checkpoint of other settings is refused, naming the field; a setting the algorithm does not take may change") {
  const cocod::Checkpoints store(scratch("family-mismatch"));
  interrupted_run<cocod::Optimizer>(store, 2);
  auto expect = [&](const cocod_test::Setup& o, const std::string& message) {
    CAPTURE(message);
    for (const auto& e : resume_errors(store, workers, model_of, {}, o)) {
      CAPTURE(e);
      CHECK(e.find(message) != std::string::npos);
    }
  };
  auto o = options;
  o.compress.format = cocod::Compression::int8;
  expect(o, "Compress::format differs (checkpoint: none, this run: int8)");
  o = options;
  o.compress.block = 64;
  expect(o, "Compress::block differs (checkpoint: 256, this run: 64)");
  o = options;
  o.outer = cocod::Outer::diloco();
  expect(o, "Outer differs (checkpoint: none, this run: {learning_rate 0.7, momentum 0.9, nesterov true})");
  o = options;
  o.fragments.count = 2;
  expect(o, "Fragments::count differs (checkpoint: 1, this run: 2)");
  o = options;
  o.depth.steps = 2;
  expect(o, "OverlapDepth::steps differs (checkpoint: 18446744073709551615, this run: 2)");
  o = options;
  o.options.seed = 12;
  expect(o, "Options::seed differs (checkpoint: 11, this run: 12)");
  o = options;
  o.sgd.nesterov = true;
  expect(o, "update::Sgd::nesterov differs (checkpoint: false, this run: true)");
  o = options;
  o.options.data_fingerprint = 18;
  expect(o, "Options::data_fingerprint differs (checkpoint: 0, this run: 18)");
  // the schedule, and the run's length
  auto expect_all = [](const std::vector<std::string>& errors, const std::string& message) {
    CAPTURE(message);
    for (const auto& e : errors) {
      CAPTURE(e);
      CHECK(e.find(message) != std::string::npos);
    }
  };
  using StepDecay = cocod::schedule::Fixed<cocod::lr::StepDecay>;
  expect_all(resume_errors_with(store, StepDecay{{.step_size = 100, .gamma = 0.5}}, total_steps),
             "Schedule::type differs (checkpoint: schedule::Fixed with lr::Cosine{total_steps 0, min_lr 0}, this run: "
             "schedule::Fixed with lr::StepDecay{step_size 100, gamma 0.5})");
  expect_all(resume_errors_with(store, Schedule{{.min_lr = 0.001}}, total_steps),
             "Schedule::type differs (checkpoint: schedule::Fixed with lr::Cosine{total_steps 0, min_lr 0}, this run: "
             "schedule::Fixed with lr::Cosine{total_steps 0, min_lr 0.001})");
  expect_all(resume_errors_with(store, Schedule{}, 30), "Schedule::total_steps differs (checkpoint: 22, this run: 30)");
  for (const auto& e : resume_errors_with(store, Schedule{}, total_steps)) CHECK(e.empty());  // the same: it resumes
  // Overlap-Local-SGD's pull-back is no setting of CoCoD-SGD: a resume with another one works
  o = options;
  o.pull = {.alpha = 0.5, .anchor_momentum = 0.3};
  for (const auto& e : resume_errors(store, workers, model_of, {}, o)) CHECK(e.empty());
  // ... and so do the guard's settings and the report's bound, which are no part of a run's identity
  o = options;
  o.options.non_finite = cocod::NonFinite::skip;
  o.options.max_skips = 5;
  o.options.report_rounds = 10;
  for (const auto& e : resume_errors(store, workers, model_of, {}, o)) CHECK(e.empty());
}

TEST_CASE("a resumed run says from where: resume() and the report, also when it had ended there") {
  const cocod::Checkpoints store(scratch("resumed-from"));
  interrupted_run<cocod::Optimizer>(store, 3);
  const std::string folder = store.folder(3).string();
  std::vector<cocod::Resumed> returned(workers), reported(workers);
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    Model model = model_of(comm.rank());
    auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, Schedule>>(comm, options);
    const auto r = static_cast<std::size_t>(comm.rank());
    returned[r] = opt.resume(model, store, cocod::Steps{total_steps});
    while (opt.steps_taken() < total_steps) opt.step(model, opt.next_batch());
    reported[r] = opt.finish(model).resumed;
  });
  for (const auto& rs : {returned, reported})
    for (const auto& r : rs) {
      CHECK(static_cast<bool>(r));
      CHECK(r.round == 3);
      CHECK(r.step == 9);
      CHECK(r.workers == workers);
      CHECK(r.folder == folder);
    }
  // a run that ended where its checkpoint was taken: the report says so (step == its length)
  const cocod::Checkpoints ended(scratch("resumed-ended"));
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    Model model = model_of(comm.rank());
    auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, Schedule>>(comm, options);
    opt.optimize(model, cocod::Steps{21}, cocod::callbacks::Checkpoint{opt, model, ended, {.rounds = 7}});
  });
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    Model model = model_of(comm.rank());
    auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, Schedule>>(comm, options);
    opt.resume_from(ended);
    const cocod::Report report = opt.optimize(model, cocod::Steps{21});
    CHECK(static_cast<bool>(report.resumed));
    CHECK(report.resumed.step == 21);
    CHECK(report.steps == 21);
  });
  // the events tell the same: a checkpoint written, and a resume from it
  std::vector<cocod::Event> told;
  std::mutex m;
  const cocod::Checkpoints events(scratch("resumed-events"));
  for (const bool resume : {false, true})
    cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
      Model model = model_of(comm.rank());
      auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, Schedule>>(comm, options);
      opt.on_event([&](const cocod::Event& e) {
        std::lock_guard lock(m);
        if (e.rank == 0) told.push_back(e);
      });
      if (resume) opt.resume_from(events);
      opt.optimize(model, cocod::Steps{21}, cocod::callbacks::Checkpoint{opt, model, events, {.rounds = resume ? std::size_t{100} : std::size_t{3}}});
    });
  REQUIRE(told.size() == 3);  // written at rounds 3 and 6 (the run's end, round 7, is not a multiple of 3); resumed at 6
  CHECK(told[0].kind == cocod::Event::Kind::checkpoint_written);
  CHECK(told[0].round == 3);
  CHECK(told[0].path == events.folder(3).string());
  CHECK(told[0].bytes > 0.0);
  CHECK(told[0].message.rfind("checkpoint written: " + events.folder(3).string() + ", ", 0) == 0);
  CHECK(told[1].round == 6);
  CHECK(told[2].kind == cocod::Event::Kind::resumed);
  CHECK(told[2].round == 6);
  CHECK(told[2].step == 18);
  CHECK(told[2].message == "resumed from " + events.folder(6).string() + " (round 6, step 18, written by 3 workers)");
  // no checkpoint: nothing to resume from
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    Model model = model_of(comm.rank());
    auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, Schedule>>(comm, options);
    opt.resume_from(cocod::Checkpoints(scratch("resumed-none")));
    CHECK_FALSE(static_cast<bool>(opt.optimize(model, cocod::Steps{6}).resumed));
  });
}

TEST_CASE("a run begun without a length resumes with one: the length is compared only where both are given") {
  const cocod::Checkpoints store(scratch("no-length"));
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    Model model = model_of(comm.rank());
    auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, cocod::schedule::Fixed<>>>(comm, options);
    opt.begin(model);  // the step-level API, no length
    for (int s = 0; s < 6; ++s) opt.step(model, opt.next_batch());
    opt.save(model, store);
    (void)opt.finish(model);
  });
  std::vector<std::size_t> steps(workers);
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    Model model = model_of(comm.rank());
    auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, cocod::schedule::Fixed<>>>(comm, options);
    const cocod::Resumed r = opt.resume(model, store, cocod::Steps{12});
    CHECK(static_cast<bool>(r));
    while (opt.steps_taken() < 12) opt.step(model, opt.next_batch());
    steps[static_cast<std::size_t>(comm.rank())] = opt.finish(model).steps;
  });
  CHECK(steps == std::vector<std::size_t>(workers, 12));
}

TEST_CASE("resume from an empty directory starts at step 0") {
  const cocod::Checkpoints store(scratch("empty"));
  Model model = model_of(0);
  auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Local>>(cocod::comm::Local{}, options);
  CHECK_FALSE(opt.resume(model, store, cocod::Steps{5}));
  CHECK(opt.steps_taken() == 0);
  CHECK(opt.finish(model).steps == 0);
  CHECK(resumed_run<cocod::Optimizer>(store).steps == total_steps);
}

TEST_CASE("bad checkpoints: one clear error on every worker, naming the file and what differs; nothing written") {
  const fs::path dir = scratch("bad");
  const cocod::Checkpoints store(dir);
  interrupted_run<cocod::Optimizer>(store, 2);
  const fs::path folder = store.folder(2);
  const fs::path file1 = folder / "worker-1.ckpt";
  const auto original = snapshot(dir);
  auto restore = [&] {
    for (const auto& [path, bytes] : original) {
      std::ofstream(path, std::ios::binary) << bytes;
    }
  };
  auto expect = [&](const std::vector<std::string>& errors, const std::string& part) {
    for (const auto& e : errors) {
      CAPTURE(e);
      CHECK(e.find(part) != std::string::npos);
      CHECK(e == errors[0]);  // the same message on every worker
    }
  };
  auto rewrite = [&](const fs::path& p, auto change) {
    std::ifstream in(p, std::ios::binary);
    std::string bytes(std::istreambuf_iterator<char>(in), {});
    in.close();
    change(bytes);
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  };
  auto fix_manifest = [&](const fs::path& p) {  // so that only the file's own checks can see the damage
    std::ifstream in(p, std::ios::binary);
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    std::vector<std::byte> b(bytes.size());
    std::memcpy(b.data(), bytes.data(), bytes.size());
    auto info = cocod::Checkpoints::read_manifest(folder);
    info.files[1].size = b.size();
    info.files[1].crc = cocod::checkpoint::crc32(b);
    store.commit(info);
  };
  const auto same = [](int r) { return model_of(r); };

  SUBCASE("truncated") {
    rewrite(file1, [](std::string& b) { b.resize(b.size() / 2); });
    expect(resume_errors(store, workers, same), file1.string() + " has ");
    fix_manifest(file1);
    expect(resume_errors(store, workers, same), "is truncated");
  }
  SUBCASE("a flipped byte") {
    // the last byte of the last section's checksum (the "end" section takes the final 19 bytes)
    rewrite(file1, [](std::string& b) { b[b.size() - 20] = static_cast<char>(b[b.size() - 20] ^ 0x10); });
    expect(resume_errors(store, workers, same), "does not match the checksum in its manifest");
    fix_manifest(file1);
    expect(resume_errors(store, workers, same), "does not match its checksum");
  }
  SUBCASE("another format version") {
    rewrite(file1, [](std::string& b) { b[8] = 7; });
    fix_manifest(file1);
    expect(resume_errors(store, workers, same), "has format version 7; this build reads version 6");
  }
  SUBCASE("a manifest of another format version: the version quoted as the manifest says it") {
    const auto manifest = folder / "MANIFEST";
    rewrite(manifest, [](std::string& b) { b.replace(b.find("cocod-checkpoint 6"), 18, "cocod-checkpoint 7"); });
    expect(resume_errors(store, workers, same), "has format version '7'; this build reads version 6");
  }
  SUBCASE("another scalar type") {
    expect(resume_errors(store, workers, [](int r) { return cocod_test::LeastSquares<float>(40, 6, 900 + static_cast<std::uint64_t>(r)); }),
           "the scalar type differs (checkpoint: double, this run: float)");
  }
  SUBCASE("another parameter count") {
    expect(resume_errors(store, workers, [](int r) { return Model(40, 7, 900 + static_cast<std::uint64_t>(r)); }),
           "the parameter count differs (checkpoint: 6, this run: 7)");
  }
  SUBCASE("another number of workers, without opting in") {
    expect(resume_errors(store, 2, same), "the number of workers differs (checkpoint: 3, this run: 2)");
  }
  SUBCASE("other options") {
    auto o = options;
    o.sgd.momentum = 0.5;
    expect(resume_errors(store, workers, same, {}, o), "update::Sgd::momentum differs (checkpoint: 0.9, this run: 0.5)");
  }
  SUBCASE("a missing worker file") {
    fs::remove(file1);
    expect(resume_errors(store, workers, same), file1.string() + " is missing (the manifest lists it)");
  }
  SUBCASE("a manifest without its files") {
    for (int r = 0; r < workers; ++r) fs::remove(folder / cocod::Checkpoints::file_name(r));
    expect(resume_errors(store, workers, same), "worker-0.ckpt is missing");
  }
  SUBCASE("a damaged manifest") {
    rewrite(folder / "MANIFEST", [](std::string& b) { b.replace(b.find("workers 3"), 9, "workers x"); });
    expect(resume_errors(store, workers, same), "MANIFEST has a bad 'workers' line");
  }
  // Whatever was wrong, the resume wrote nothing: the files are as the damage left them.
  const auto damaged = snapshot(dir);
  for (const auto& [path, bytes] : damaged) CHECK(fs::exists(path));
  CHECK(!fs::exists(store.folder(3)));
  restore();
}

TEST_CASE("every byte of a checkpoint file is covered: a flip anywhere is refused by the reader") {
  const cocod::Checkpoints store(scratch("flip"));
  interrupted_run<cocod::PipeSGD>(store, 1);
  const auto bytes = cocod::Checkpoints::read_bytes(store.folder(1) / "worker-0.ckpt");
  REQUIRE(bytes.size() > 100);
  std::size_t refused = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto b = bytes;
    b[i] ^= std::byte{0x01};
    try {
      const cocod::checkpoint::FileReader file(b, "f");
      (void)cocod::checkpoint::read_header(file);
    } catch (const cocod::CheckpointError&) {
      ++refused;
    }
  }
  CHECK(refused == bytes.size());
}

TEST_CASE("the store keeps the newest K complete checkpoints and ignores folders never completed") {
  const fs::path dir = scratch("keep");
  const cocod::Checkpoints store(dir, 2);
  (void)whole_run<cocod::LocalSGD>(&store);
  CHECK(store.rounds() == std::vector<std::size_t>{6, 7});
  // a crash while round 8 was written: its folder has no manifest, and it is not read
  fs::create_directories(store.folder(8));
  std::ofstream(store.folder(8) / "worker-0.ckpt") << "half a file";
  REQUIRE(store.latest().has_value());
  CHECK(store.latest()->round == 7);
  CHECK(store.latest()->workers == workers);
  CHECK_THROWS_WITH_AS(cocod::Checkpoints(dir, 0), "cocod::Checkpoints: keep must be >= 1 (got 0)", std::invalid_argument);
}

TEST_CASE("save() between rounds only") {
  const cocod::Checkpoints store(scratch("mid-round"));
  Model model = model_of(0);
  auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Local>>(cocod::comm::Local{}, options);
  opt.begin(model, cocod::Steps{10});
  opt.step(model, opt.next_batch());
  CHECK_THROWS_WITH_AS(opt.save(model, store), doctest::Contains("save() between rounds only"), std::logic_error);
}

namespace {
/// A model with state beyond its parameters: a count of the samples it has seen.
struct Counting : Model {
  using Model::Model;
  std::uint64_t seen = 0;
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<double> g) {
    seen += batch.size();
    return Model::loss_and_gradient(batch, g);
  }
  void save_state(std::vector<std::byte>& out) const {
    const auto* p = reinterpret_cast<const std::byte*>(&seen);
    out.assign(p, p + sizeof seen);
  }
  void load_state(std::span<const std::byte> in) {
    if (in.size() != sizeof seen) throw std::runtime_error("Counting: bad state");
    std::memcpy(&seen, in.data(), sizeof seen);
  }
};
static_assert(cocod::StatefulModel<Counting>);
static_assert(!cocod::StatefulModel<Model>);
}  // namespace

TEST_CASE("a model's own state (save_state / load_state) travels with the checkpoint") {
  const cocod::Checkpoints store(scratch("stateful"));
  auto run = [&](bool resume, std::size_t stop_round) {
    std::uint64_t seen = 0;
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
      Counting model(40, 6, 5 + static_cast<std::uint64_t>(comm.rank()));
      cocod::Optimizer<Counting, cocod::comm::Threads> opt{comm, {.period = 2, .batch_size = 3}};
      if (resume)
        CHECK(opt.resume(model, store, cocod::Steps{12}));
      else
        opt.begin(model, cocod::Steps{12});
      while (opt.steps_taken() < 12) {
        opt.step(model, opt.next_batch());
        if (opt.round_ended() && opt.info().period * stop_round == opt.steps_taken()) {
          opt.save(model, store);
          return;
        }
      }
      (void)opt.finish(model);
      if (comm.rank() == 0) seen = model.seen;
    });
    return seen;
  };
  (void)run(false, 3);
  CHECK(run(true, 100) == 12 * 3);  // 6 steps before the checkpoint, 6 after, 3 samples each
}

TEST_CASE("an elastic resume: 3 workers saved, 2 continue from the consensus and the counters") {
  const cocod::Checkpoints store(scratch("elastic"));
  interrupted_run<cocod::Optimizer>(store, 4);
  std::vector<double> consensus(6, 0.0);
  {  // the consensus of the saved models, computed here from the files
    const auto info = *store.latest();
    for (int j = 0; j < 3; ++j) {
      const auto bytes = cocod::Checkpoints::read_file(info, j);
      const cocod::checkpoint::FileReader f(bytes, "f");
      const double w = cocod::checkpoint::read_header(f).weight;
      const auto x = f.fields("parameters").values<double>("x", 6);
      for (std::size_t i = 0; i < 6; ++i) consensus[i] = j == 0 ? w * x[i] : consensus[i] + w * x[i];
    }
  }
  std::vector<std::size_t> steps(2);
  std::vector<std::vector<double>> start(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Model model = model_of(comm.rank());
    auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, Schedule>>(comm, options);
    REQUIRE(opt.resume(model, store, cocod::Steps{total_steps}, {.workers_may_change = true}));
    start[static_cast<std::size_t>(comm.rank())] = model.x;
    steps[static_cast<std::size_t>(comm.rank())] = opt.steps_taken();
    while (opt.steps_taken() < total_steps) opt.step(model, opt.next_batch());
    CHECK(opt.finish(model).steps == total_steps);
  });
  CHECK(start[0] == consensus);
  CHECK(start[1] == consensus);
  CHECK(steps[0] == 4 * options.options.period);
}

// comm::Threads that records the length of every broadcast.
struct BroadcastLog {
  cocod::comm::Threads inner;
  std::vector<std::size_t>* lengths;
  using Request = cocod::comm::Threads::Request;
  int rank() const { return inner.rank(); }
  int size() const { return inner.size(); }
  template <class T>
  void broadcast(std::span<T> buffer, int root) {
    lengths->push_back(buffer.size());
    inner.broadcast(buffer, root);
  }
  template <class T>
  void all_reduce(std::span<T> buffer) {
    inner.all_reduce(buffer);
  }
  template <class T>
  Request all_reduce_async(std::span<T> buffer) {
    return inner.all_reduce_async(buffer);
  }
};
static_assert(cocod::comm::Communicator<BroadcastLog>);

TEST_CASE("an elastic resume broadcasts no parameters: every worker computed the same consensus") {
  const cocod::Checkpoints store(scratch("elastic-no-broadcast"));
  interrupted_run<cocod::Optimizer>(store, 4);
  std::vector<std::vector<std::size_t>> begun(2), resumed(2);
  std::vector<std::vector<double>> start(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads threads) {
    const auto r = static_cast<std::size_t>(threads.rank());
    for (const bool resume : {false, true}) {
      Model model = model_of(threads.rank());
      BroadcastLog comm{threads, resume ? &resumed[r] : &begun[r]};
      auto opt = cocod_test::make<cocod::Optimizer<Model, BroadcastLog, Schedule>>(comm, options);
      if (resume)
        REQUIRE(opt.resume(model, store, cocod::Steps{total_steps}, {.workers_may_change = true}));
      else
        opt.begin(model, cocod::Steps{total_steps});
      start[r] = model.x;
      opt.finish(model);
    }
  });
  CHECK(start[0] == start[1]);
  for (std::size_t r = 0; r < 2; ++r) {
    CHECK(std::count(begun[r].begin(), begun[r].end(), std::size_t{6}) == 1);  // a fresh run: rank 0's parameters
    CHECK(std::count(resumed[r].begin(), resumed[r].end(), std::size_t{6}) == 0);
  }
}

TEST_CASE("an elastic resume keeps the passes over the data an Epochs length promised") {
  // 240 samples shared by the workers, batches of 4: 20 steps a pass with 3 workers, 30 with 2.
  // 3 workers save at round 4 (step 12: 0.6 passes); 2 continue with the 1.4 passes still due
  // (42 steps: 54 in all, where a length counted afresh would be 60), and a file they save on
  // the way keeps that progress for the next resume.
  const cocod::Checkpoints store(scratch("elastic-epochs"));
  const auto shard = [](int rank, int n) { return Model(240 / static_cast<std::size_t>(n), 6, 900 + static_cast<std::uint64_t>(rank)); };
  using Opt = cocod::Optimizer<Model, cocod::comm::Threads>;
  cocod::comm::Threads::run(3, [&](cocod::comm::Threads comm) {
    Model model = shard(comm.rank(), 3);
    Opt opt{comm, options.options, cocod::update::Sgd{.momentum = 0.9}};
    opt.begin(model, cocod::Epochs{2});
    CHECK(opt.info().total_steps == 40);
    while (opt.steps_taken() < 12) opt.step(model, opt.next_batch());
    opt.save(model, store);
  });
  std::vector<cocod::Report> reports(2);
  for (const bool again : {false, true}) {
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
      Model model = shard(comm.rank(), 2);
      Opt opt{comm, options.options, cocod::update::Sgd{.momentum = 0.9}};
      REQUIRE(opt.resume(model, store, cocod::Epochs{2}, {.workers_may_change = true}));
      CHECK(opt.info().total_steps == 54);
      if (!again) {  // saved at step 24 (0.6 + 12/30 = 1 pass): the same length from there
        while (opt.steps_taken() < 24) opt.step(model, opt.next_batch());
        opt.save(model, store);
      }
      while (opt.steps_taken() < opt.info().total_steps) opt.step(model, opt.next_batch());
      reports[static_cast<std::size_t>(comm.rank())] = opt.finish(model);
    });
    for (const auto& r : reports) {
      CHECK(r.steps == 54);
      CHECK(r.epochs == doctest::Approx(2.0));
    }
  }
}

TEST_CASE("an adaptive schedule resumes from its saved plan") {
  using A = cocod::schedule::Adaptive<>;
  const cocod::Checkpoints store(scratch("adaptive"));
  std::vector<std::size_t> saved_period(2), saved_batch(2), resumed_period(2), resumed_batch(2);
  struct Slow : Model {
    using Model::Model;
    int delay_us = 0;
    double loss_and_gradient(std::span<const std::size_t> batch, std::span<double> g) {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us * static_cast<int>(batch.size())));
      return Model::loss_and_gradient(batch, g);
    }
  };
  const A schedule{.max_period = 6, .first = 2, .every = 3};
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Slow model(200, 5, static_cast<std::uint64_t>(comm.rank()));
    model.delay_us = comm.rank() == 1 ? 80 : 10;
    cocod::Optimizer<Slow, cocod::comm::Threads, A> opt{comm, {.period = 2, .batch_size = 8}, schedule};
    opt.begin(model, cocod::Steps{400});
    while (opt.steps_taken() < 400) {
      opt.step(model, opt.next_batch());
      if (opt.round_ended() && opt.last_round().round == 8) break;
    }
    opt.save(model, store);
    saved_period[static_cast<std::size_t>(comm.rank())] = opt.info().period;
    saved_batch[static_cast<std::size_t>(comm.rank())] = opt.info().batch_size;
  });
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Slow model(200, 5, static_cast<std::uint64_t>(comm.rank()));
    cocod::Optimizer<Slow, cocod::comm::Threads, A> opt{comm, {.period = 2, .batch_size = 8}, schedule};
    REQUIRE(opt.resume(model, store, cocod::Steps{400}));
    resumed_period[static_cast<std::size_t>(comm.rank())] = opt.info().period;
    resumed_batch[static_cast<std::size_t>(comm.rank())] = opt.info().batch_size;
    CHECK(opt.steps_taken() > 0);
  });
  CHECK(saved_batch[1] < 8);  // the slow worker was given a smaller batch
  CHECK(resumed_period == saved_period);
  CHECK(resumed_batch == saved_batch);
}

TEST_CASE("callbacks::Checkpoint saves every R rounds, or every T seconds at the same round on every worker") {
  const Outcome whole = whole_run<cocod::Optimizer>();
  auto run = [&](const cocod::Checkpoints& store, cocod::callbacks::CheckpointEvery every) {
    std::vector<std::size_t> saves(workers);
    Outcome out;
    out.x.resize(workers);
    std::mutex m;
    cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
      using Opt = cocod::Optimizer<Model, cocod::comm::Threads, Schedule>;
      Model model = model_of(comm.rank());
      auto opt = cocod_test::make<Opt>(comm, options);
      cocod::callbacks::Checkpoint save{opt, model, store, every};
      const auto report = opt.optimize(model, cocod::Steps{total_steps}, save);
      saves[static_cast<std::size_t>(comm.rank())] = save.saves();
      keep<Opt>(out, m, comm.rank(), model, report);
    });
    CHECK(out == whole);
    return saves;
  };
  {
    const cocod::Checkpoints store(scratch("every-2-rounds"));
    CHECK(run(store, {.rounds = 2}) == std::vector<std::size_t>(workers, 3));  // after rounds 2, 4 and 6
    CHECK(store.rounds() == std::vector<std::size_t>{4, 6});
  }
  {
    const cocod::Checkpoints store(scratch("every-microsecond"));
    const auto saves = run(store, {.seconds = 1e-6});
    CHECK(saves[0] >= 3);
    CHECK(saves == std::vector<std::size_t>(workers, saves[0]));
  }
  Model model = model_of(0);
  auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Local>>(cocod::comm::Local{}, options);
  const cocod::Checkpoints store(scratch("unused"));
  CHECK_THROWS_WITH_AS((cocod::callbacks::Checkpoint{opt, model, store, {}}),
                       "cocod::callbacks::CheckpointEvery: rounds or seconds must be > 0 (got rounds = 0, seconds = 0)",
                       std::invalid_argument);
}

TEST_CASE("model_digest: the same bits give the same digest, one changed bit another") {
  std::vector<double> a{1.0, 2.0, 3.0};
  auto b = a;
  CHECK(cocod::digest(std::span<const double>(a)) == cocod::digest(std::span<const double>(b)));
  CHECK(cocod::digest(std::span<const double>(a)).size() == 16);
  b[1] = std::nextafter(b[1], 3.0);
  CHECK(cocod::digest(std::span<const double>(a)) != cocod::digest(std::span<const double>(b)));
  Model m = model_of(0);
  CHECK(cocod::model_digest(m) == cocod::digest(std::span<const double>(m.x)));
}

TEST_CASE("a bounded report keeps the latest rounds; callbacks see every round; a resumed run keeps the bound") {
  struct Count {
    std::size_t rounds = 0;
    void on_round(const cocod::RoundStats&) { ++rounds; }
  };
  Model model = model_of(0);
  auto o = options.options;
  o.report_rounds = 3;
  cocod::Optimizer<Model, cocod::comm::Local> opt{cocod::comm::Local{}, o, options.sgd};
  Count count;
  const auto report = opt.optimize(model, cocod::Steps{31}, count);  // 10 full rounds and a partial one
  CHECK(count.rounds == 11);
  CHECK(report.rounds.size() == 3);
  CHECK(report.rounds_dropped == 8);
  CHECK(report.rounds.back().round == 10);
  CHECK(report.rounds.front().round == 8);
  CHECK(std::isfinite(report.median_round_s()));
  o.report_rounds = 0;  // all
  cocod::Optimizer<Model, cocod::comm::Local> all{cocod::comm::Local{}, o, options.sgd};
  CHECK(all.optimize(model, cocod::Steps{31}).rounds.size() == 11);
}

TEST_CASE("workers that name different directories: the same error on every worker") {
  const cocod::Checkpoints with(scratch("differ-a")), without(scratch("differ-b"));
  interrupted_run<cocod::Optimizer>(with, 1);
  std::vector<std::string> errors(workers);
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    Model model = model_of(comm.rank());
    auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, Schedule>>(comm, options);
    try {
      (void)opt.resume(model, comm.rank() == 0 ? with : without, cocod::Steps{total_steps});
    } catch (const cocod::CheckpointError& e) {
      errors[static_cast<std::size_t>(comm.rank())] = e.what();
    }
  });
  for (const auto& e : errors) {
    CAPTURE(e);
    CHECK(e.find("the workers see different checkpoints (rank 0: round 1, rank 1: none)") != std::string::npos);
    CHECK(e == errors[0]);
  }
}

namespace {
/// An update rule whose State does not say what it holds.
struct Opaque {
  template <class Backend, class T>
  struct State {
    void apply(std::span<T> x, std::span<T> g, T lr) {
      for (std::size_t i = 0; i < x.size(); ++i) x[i] -= lr * g[i];
    }
  };
  template <class Backend, class T>
  State<Backend, T> start(std::size_t) const {
    return {};
  }
};
}  // namespace

TEST_CASE("a part that does not say what it holds compiles with optimize(), and cannot be checkpointed") {
  Model model = model_of(0);
  using Opt = cocod::Optimizer<Model, cocod::comm::Local, cocod::schedule::Fixed<>, Opaque>;
  Opt opt{cocod::comm::Local{}, options.options};
  CHECK(opt.optimize(model, cocod::Steps{6}).steps == 6);
  const cocod::Checkpoints store(scratch("opaque"));
  opt.begin(model, cocod::Steps{6});
  CHECK_THROWS_WITH_AS(opt.save(model, store), doctest::Contains("the Update's State cannot be checkpointed"),
                       cocod::CheckpointError);
  CHECK(store.rounds().empty());  // nothing written
}

namespace {
/// Asks to stop at the end of round `at` (a round hook, like EarlyStop).
struct StopAt {
  std::size_t at = 0;
  bool on_round(const cocod::RoundStats& r) { return r.round == at; }
};
/// Throws in a late hook once round `at` has ended: a crash right after that round's checkpoint.
struct CrashAfter {
  std::size_t at = 0;
  void after_round(const cocod::RoundStats& r) {
    if (r.round == at) throw std::runtime_error("crash");
  }
};
}  // namespace

TEST_CASE("a stop asked for at a checkpointed round end is in the checkpoint: the resumed run stops where the run did") {
  for (const std::size_t ask : {std::size_t{3}, std::size_t{4}}) {
    CAPTURE(ask);
    const cocod::Checkpoints store(scratch("stop-" + std::to_string(ask)));
    std::size_t whole_steps = 0, resumed_steps = 0;
    std::vector<double> whole_x, resumed_x;
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {  // uninterrupted, with the stop
      Model model = model_of(comm.rank());
      auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, Schedule>>(comm, options);
      const auto report = opt.optimize(model, cocod::Steps{total_steps}, StopAt{ask});
      if (comm.rank() == 0) whole_steps = report.steps, whole_x = model.x;
    });
    REQUIRE(whole_steps < total_steps);
    CHECK_THROWS(cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {  // crashes after the save at `ask`
      Model model = model_of(comm.rank());
      auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, Schedule>>(comm, options);
      cocod::callbacks::Checkpoint save{opt, model, store, {.rounds = 1}};
      opt.optimize(model, cocod::Steps{total_steps}, StopAt{ask}, save, CrashAfter{ask});
    }));
    REQUIRE(store.latest()->round == ask + 1);
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {  // resumed, without the stop callback
      Model model = model_of(comm.rank());
      auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, Schedule>>(comm, options);
      opt.resume_from(store);
      const auto report = opt.optimize(model, cocod::Steps{total_steps});
      if (comm.rank() == 0) resumed_steps = report.steps, resumed_x = model.x;
    });
    CHECK(resumed_steps == whole_steps);
    CHECK(resumed_x == whole_x);
  }
}

TEST_CASE("saving twice at one round end, and over a later checkpoint of another run, leaves one complete checkpoint") {
  const cocod::Checkpoints store(scratch("twice"));
  interrupted_run<cocod::Optimizer>(store, 5);  // another run's checkpoint at round 5
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    Model model = model_of(comm.rank());
    auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads, Schedule>>(comm, options);
    opt.begin(model, cocod::Steps{total_steps});
    while (opt.steps_taken() < 2 * options.options.period) opt.step(model, opt.next_batch());
    opt.save(model, store);
    opt.save(model, store);
  });
  CHECK(store.rounds() == std::vector<std::size_t>{2});  // round 5 belonged to the run this one replaced
  const auto info = *store.latest();
  for (int r = 0; r < workers; ++r) CHECK_NOTHROW((void)cocod::Checkpoints::read_file(info, r));
}

namespace {
/// A checkpoint's section "window" holding a pending plan of `period`, batch size 4 and
/// `hiding` steps, read into `window` (throws what the window's checks throw).
void load_window(cocod::schedule::Window<cocod::schedule::Adaptive<>>& window, std::size_t period, std::size_t hiding) {
  window.start(2);
  cocod::checkpoint::FieldWriter f;
  f.value("compute_s", 0.0);
  f.value("samples", 0.0);
  f.value("comm_s", 0.0);
  f.value("collectives", std::size_t{0});
  f.value("round_collective_s", 0.0);
  f.value("round_collective_sq", 0.0);
  f.value("rounds", std::size_t{0});
  f.value("ready_sample_s", 0.0);
  f.value("ready_collective_s", 0.0);
  f.value("ready", false);
  f.value("pending", true);
  f.value("plan_period", period);
  f.value("plan_batch_size", std::size_t{4});
  f.value("plan_hiding_steps", hiding);
  f.values("measured", std::span<const double>(std::vector<double>(4, 0.0)));
  cocod::checkpoint::FileWriter w;
  w.section("header", cocod::checkpoint::FieldWriter{});
  w.section("window", f);
  const auto bytes = std::move(w).finish();
  const cocod::checkpoint::FileReader file(bytes, "crafted");
  cocod::detail::LoadArchive a(file);
  a.begin("window");
  window.serialize(a);
}
}  // namespace

TEST_CASE("a checkpointed adaptive window whose pending plan has period 0 is refused; a valid one keeps its hiding steps") {
  cocod::schedule::Window<cocod::schedule::Adaptive<>> window;
  CHECK_THROWS_WITH_AS(load_window(window, 0, 0), doctest::Contains("section 'window' field 'plan_period' and plan_batch_size are not a plan"),
                       cocod::CheckpointError);
  load_window(window, 3, 5);
  cocod::schedule::Plan plan;
  REQUIRE(window.take(plan));
  CHECK(plan.period == 3);
  CHECK(plan.batch_size == 4);
  CHECK(plan.hiding_steps == 5);
}
