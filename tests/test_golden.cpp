// Every algorithm and every combination of the family's strategies gives the bits it gave before
// the run was split into parts behind narrow interfaces: digests of short runs (3 workers,
// unequal batches, momentum, a partial last round), the guard's recoveries in skip mode
// included, recorded with the library as it was and compared here to the bit. A change that
// moves any of them changes a result.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "support.hpp"

namespace {
using Base = cocod_test::LeastSquares<double>;

/// Least squares whose gradient holds a NaN on worker `bad` at its local steps in [from, to):
/// found in the worker's contribution when it is next sent.
struct Flaky : Base {
  using Base::Base;
  int rank = 0, bad = -1;
  std::size_t calls = 0, from = 0, to = 0;
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<double> g) {
    const double loss = Base::loss_and_gradient(batch, g);
    const bool nan = rank == bad && calls >= from && calls < to;
    ++calls;
    if (nan) g[1] = std::numeric_limits<double>::quiet_NaN();
    return loss;
  }
};

/// "digest/final loss/skips" of every worker after 26 steps (period 3), space-separated.
template <template <class...> class Algorithm>
std::string run(const cocod_test::Setup& s, int bad = -1, std::size_t from = 0, std::size_t to = 0) {
  std::vector<std::string> out(3);
  std::mutex m;
  cocod::comm::Threads::run(3, [&](cocod::comm::Threads comm) {
    Flaky model(60, 9, 4000 + static_cast<std::uint64_t>(comm.rank()));
    model.rank = comm.rank();
    model.bad = bad;
    model.from = from;
    model.to = to;
    auto opt = cocod_test::make<Algorithm<Flaky, cocod::comm::Threads>>(comm, s);
    const auto report = opt.optimize(model, cocod::Steps{26});
    char tail[64];
    std::snprintf(tail, sizeof tail, "/%.17g/%zu", report.final_loss(), static_cast<std::size_t>(report.total(&cocod::RoundStats::skipped)));
    std::lock_guard lock(m);
    out[static_cast<std::size_t>(comm.rank())] = cocod::model_digest(model) + tail;
  });
  return out[0] + " " + out[1] + " " + out[2];
}

std::string three(const char* one) { return std::string(one) + " " + one + " " + one; }

const cocod_test::Setup base{{.learning_rate = 0.04, .period = 3, .batch_size = 5, .speeds = {1.0, 2.0, 1.5}, .seed = 77},
                             {.momentum = 0.9}};
}  // namespace

TEST_CASE("the algorithms give the bits they gave") {
  CHECK(run<cocod::CoCoDSGD>(base) == three("ab7e15eda5404d95/0.16478356591973412/0"));
  CHECK(run<cocod::SyncSGD>(base) == three("be8512a3eacd580b/0.17349413089007351/0"));
  CHECK(run<cocod::LocalSGD>(base) == three("a79245c6dbc0f9f5/0.17144530258661395/0"));
  CHECK(run<cocod::PipeSGD>(base) == three("2468e18f6cb9df49/0.17499506917153801/0"));
  CHECK(run<cocod::OverlapLocalSGD>(base) == three("d1bdcb5e6ee517bf/0.15760960853990108/0"));
  auto s = base;
  s.sgd.nesterov = true;
  s.sgd.weight_decay = 1e-3;
  CHECK(run<cocod::CoCoDSGD>(s) == three("406e8031981706dd/0.16503776310475207/0"));
}

TEST_CASE("every combination of the family's strategies gives the bits it gave") {
  auto s = base;
  s.outer = cocod::Outer::diloco();
  CHECK(run<cocod::CoCoDSGD>(s) == three("9dd17f089f39d7d7/0.23169065886429224/0"));
  CHECK(run<cocod::LocalSGD>(s) == three("abf5245ae2eea606/0.20688640265619002/0"));
  s.compress = {cocod::Compression::int8, 4};
  s.fragments.count = 2;
  CHECK(run<cocod::CoCoDSGD>(s) == three("364fe430941a9297/0.17703818649419134/0"));
  s = base;
  s.fragments = {.count = 3, .merge = cocod::FragmentMerge::lerp, .alpha = 0.3};
  CHECK(run<cocod::CoCoDSGD>(s) == three("29b1c641a0568ec7/0.16351126633801288/0"));
  s = base;
  s.compress = {cocod::Compression::fp16, 8};
  CHECK(run<cocod::CoCoDSGD>(s) == three("f8b76dffa589d1cc/0.16478064324284711/0"));
  CHECK(run<cocod::LocalSGD>(s) == three("65e122a49bc7594c/0.17144413191813901/0"));
  s = base;
  s.compress.format = cocod::Compression::bf16;
  s.pull = {.alpha = 0.5, .anchor_momentum = 0.6};
  CHECK(run<cocod::OverlapLocalSGD>(s) == three("6840b60fa46e0875/0.16661976163697503/0"));
}

TEST_CASE("the guard's recoveries give the bits they gave (skip mode, a NaN in rank 1's gradient)") {
  auto s = base;
  s.options.non_finite = cocod::NonFinite::skip;
  CHECK(run<cocod::CoCoDSGD>(s, 1, 7, 9) == three("5e096e72db05e531/0.16939374967054813/1"));
  CHECK(run<cocod::SyncSGD>(s, 1, 7, 9) == three("23c0d643bf72e0c3/0.17726181521550383/2"));
  CHECK(run<cocod::LocalSGD>(s, 1, 7, 9) == three("56d4a47b9ff9be50/0.17487890180042359/1"));
  CHECK(run<cocod::PipeSGD>(s, 1, 7, 9) == three("f6775a7744907f5d/0.17920707345922071/2"));
  CHECK(run<cocod::OverlapLocalSGD>(s, 1, 7, 9) == three("7fe382cfc1b8836d/0.16457333355469261/1"));
  s.outer = cocod::Outer::diloco();
  s.compress = {cocod::Compression::int8, 4};
  s.fragments.count = 2;
  CHECK(run<cocod::CoCoDSGD>(s, 1, 7, 9) == three("2087af512fabe3ba/0.17271054340582787/1"));
  CHECK(run<cocod::LocalSGD>(s, 1, 7, 9) == three("51e938fff4cc9980/0.19621351368888693/1"));
  auto o = base;
  o.options.non_finite = cocod::NonFinite::skip;
  o.compress.format = cocod::Compression::bf16;
  CHECK(run<cocod::OverlapLocalSGD>(o, 1, 7, 9) == three("d4dd1c2e6e6c1a1e/0.16459724716813851/1"));
}
