// The family's rules (the outer optimizer, Overlap-Local-SGD, compressed exchange with error
// feedback, streamed fragments, overlap depth), each recomputed here element by element in plain loops: the
// library's workers must match to the bit. The identities: outer lr 1 with no momentum is the
// plain algorithm to rounding; with one worker the serial equivalents.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <cmath>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "support.hpp"

namespace {
using T = double;
using Model = cocod_test::LeastSquares<T>;
using Vec = std::vector<T>;
using Models = std::vector<Vec>;

Model make(int rank, std::size_t dim = 11) { return Model(90, dim, 1700 + static_cast<std::uint64_t>(rank)); }

enum class Algo { local, cocod, overlap };

/// z = outer(z, z - abar) on [lo, lo + n), PyTorch SGD semantics; `first`: the first outer step.
void outer_step(const cocod::Outer& r, Vec& z, const Vec& abar, Vec& b, std::size_t lo, bool first) {
  const T eta = static_cast<T>(r.learning_rate), beta = static_cast<T>(r.momentum);
  for (std::size_t j = 0; j < abar.size(); ++j) {
    T& zj = z[lo + j];
    const T delta = zj - abar[j];
    if (beta == T(0)) {
      zj = zj - eta * delta;
      continue;
    }
    b[lo + j] = first ? delta : beta * b[lo + j] + delta;
    zj = zj - eta * (r.nesterov ? delta + beta * b[lo + j] : b[lo + j]);
  }
}

/// The plain simulation of N workers in one thread. Returns each worker's model after every
/// round and, last, after finish.
struct Simulation {
  Algo algo = Algo::local;
  int n = 1;
  cocod_test::Setup o;
  /// Each round's (period, hiding steps) where a schedule re-plans; empty: o.options.period throughout.
  std::vector<std::pair<std::size_t, std::size_t>> plans;

  std::size_t N = 0, d = 0;
  std::vector<Model> models;
  std::vector<cocod_test::PlainSgd<T>> sgd;
  std::vector<cocod::BatchSampler> samplers;
  std::vector<std::size_t> M;
  Vec w;
  // the compressed exchange: each worker's residual, each owner's residual per fragment
  Models residual, owner_residual;

  // sum_i s_i in rank order, or its compressed estimate z + D(Q(sum of deviations)).
  Vec exchange(const Models& s, const Vec& zpiece, std::size_t offset, std::size_t fragment) {
    const std::size_t len = s[0].size();
    Vec out(len);
    if (o.compress.format == cocod::Compression::none) {
      for (std::size_t j = 0; j < len; ++j) {
        T acc = s[0][j];
        for (std::size_t i = 1; i < N; ++i) acc = acc + s[i][j];
        out[j] = acc;
      }
      return out;
    }
    const std::size_t L = (len + N - 1) / N, B = o.compress.block;
    const std::size_t bytes = cocod::compress::encoded_bytes(o.compress.format, L, B, sizeof(T));
    std::vector<std::vector<std::vector<std::byte>>> c(N, std::vector<std::vector<std::byte>>(N, std::vector<std::byte>(bytes)));
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t q = 0; q < N; ++q) {
        Vec piece(L, T(0));
        const std::size_t lo = std::min(len, q * L), hi = std::min(len, lo + L);
        for (std::size_t j = lo; j < hi; ++j) piece[j - lo] = (s[i][j] - w[i] * zpiece[j]) + residual[i][offset + j];
        cocod::compress::encode(o.compress.format, std::span<T>(piece), B, std::span<std::byte>(c[i][q]));
        for (std::size_t j = lo; j < hi; ++j) residual[i][offset + j] = piece[j - lo];
      }
    for (std::size_t q = 0; q < N; ++q) {
      Vec sum(L), part(L);
      cocod::compress::decode(o.compress.format, std::span<const std::byte>(c[0][q]), B, std::span<T>(sum));
      for (std::size_t i = 1; i < N; ++i) {
        cocod::compress::decode(o.compress.format, std::span<const std::byte>(c[i][q]), B, std::span<T>(part));
        for (std::size_t j = 0; j < L; ++j) sum[j] = sum[j] + part[j];
      }
      Vec& r = owner_residual[q * o.fragments.count + fragment];
      if (r.empty()) r.assign(L, T(0));
      for (std::size_t j = 0; j < L; ++j) sum[j] = sum[j] + r[j];
      std::vector<std::byte> C(bytes);
      cocod::compress::encode(o.compress.format, std::span<T>(sum), B, std::span<std::byte>(C));
      r = sum;
      Vec decoded(L);
      cocod::compress::decode(o.compress.format, std::span<const std::byte>(C), B, std::span<T>(decoded));
      const std::size_t lo = std::min(len, q * L), hi = std::min(len, lo + L);
      for (std::size_t j = lo; j < hi; ++j) out[j] = zpiece[j] + decoded[j - lo];
    }
    return out;
  }

  void setup() {
    N = static_cast<std::size_t>(n);
    double total = 0;
    for (int i = 0; i < n; ++i) total += o.options.speeds[static_cast<std::size_t>(i)];
    for (std::size_t i = 0; i < N; ++i) {
      models.push_back(make(static_cast<int>(i)));
      sgd.push_back({static_cast<T>(o.sgd.momentum), static_cast<T>(o.sgd.weight_decay), o.sgd.nesterov, {}});
      samplers.emplace_back(models[i].num_samples(), o.options.seed, static_cast<int>(i));
      M.push_back(static_cast<std::size_t>(std::round(static_cast<double>(N * o.options.batch_size) * o.options.speeds[i] / total)));
    }
    double Msum = 0;
    for (auto m : M) Msum += static_cast<double>(m);
    for (std::size_t i = 0; i < N; ++i) w.push_back(static_cast<T>(static_cast<double>(M[i]) / Msum));
    d = models[0].x.size();
    for (std::size_t i = 1; i < N; ++i) models[i].x = models[0].x;
    residual.assign(N, Vec(d, T(0)));
    owner_residual.assign(N * o.fragments.count, Vec{});
  }

  std::vector<Models> run(std::size_t rounds) {
    setup();
    const std::size_t F = o.fragments.count;
    auto fbegin = [&](std::size_t f) { return f * d / F; };
    auto fsize = [&](std::size_t f) { return (f + 1) * d / F - f * d / F; };
    Vec z = models[0].x, b(d, T(0));
    std::vector<bool> stepped(F, false);
    Models anchors(N, models[0].x), velocity(N, Vec(d, T(0)));
    Models send(N);
    std::size_t f = 0;
    auto snapshot = [&](std::size_t frag) {  // a^f = x^f, s = w x^f
      f = frag;
      for (std::size_t i = 0; i < N; ++i) {
        send[i].assign(fsize(f), T(0));
        for (std::size_t j = 0; j < fsize(f); ++j) {
          anchors[i][fbegin(f) + j] = models[i].x[fbegin(f) + j];
          send[i][j] = w[i] * models[i].x[fbegin(f) + j];
        }
      }
    };
    if (algo == Algo::cocod) snapshot(0);
    bool posted = false;  // Overlap-Local-SGD: an anchor in flight
    std::vector<Models> history;
    Vec g(d);
    bool snapshot_due = false;  // the latest round had a depth tau < k: no snapshot at its end
    for (std::size_t round = 0; round < rounds; ++round) {
      // CoCoD-SGD with an overlap depth tau < k: the snapshot after step k - tau, merged at the
      // same round's end; otherwise the snapshot taken at the last round's end (or, after a
      // round of depth tau < k, at this one's start), posted at the start.
      const std::size_t k = plans.empty() ? o.options.period : plans[round].first;
      const std::size_t hiding = plans.empty() ? 0 : plans[round].second;
      const bool deferred = algo == Algo::cocod && !o.depth.whole(k, hiding);
      const std::size_t posted_at = deferred ? k - o.depth.at(k, hiding) : 0;
      Vec abar;
      auto post = [&] {
        Vec zpiece(z.begin() + static_cast<std::ptrdiff_t>(fbegin(f)), z.begin() + static_cast<std::ptrdiff_t>(fbegin(f) + fsize(f)));
        if (algo == Algo::overlap) zpiece = z;
        abar = exchange(send, zpiece, fbegin(f), f);
      };
      for (std::size_t step = 0; step <= k; ++step) {
        if (step == posted_at && (algo == Algo::cocod || (algo == Algo::overlap && posted))) {
          if (deferred || snapshot_due) snapshot(f);
          post();
        }
        if (step == k) break;
        for (std::size_t i = 0; i < N; ++i) {
          std::vector<std::size_t> batch(M[i]);
          samplers[i].next(batch);
          models[i].loss_and_gradient(batch, g);
          sgd[i].apply(models[i].x, g, static_cast<T>(o.options.learning_rate));
        }
      }
      if (algo == Algo::local) {
        for (std::size_t i = 0; i < N; ++i) {
          send[i].resize(d);
          for (std::size_t j = 0; j < d; ++j) send[i][j] = w[i] * models[i].x[j];
        }
        abar = exchange(send, z, 0, 0);
        if (o.outer) {
          outer_step(*o.outer, z, abar, b, 0, !stepped[0]);
          stepped[0] = true;
        } else {
          z = abar;
        }
        for (auto& m : models) m.x = z;
      } else if (algo == Algo::cocod) {
        const std::size_t lo = fbegin(f);
        if (o.outer) {
          outer_step(*o.outer, z, abar, b, lo, !stepped[f]);
          stepped[f] = true;
        } else {
          for (std::size_t j = 0; j < abar.size(); ++j) z[lo + j] = abar[j];
        }
        const T alpha = static_cast<T>(o.fragments.alpha);
        for (std::size_t i = 0; i < N; ++i)
          for (std::size_t j = lo; j < lo + fsize(f); ++j) {
            T& x = models[i].x[j];
            if (o.fragments.merge == cocod::FragmentMerge::lerp && F > 1)
              x = (T(1) - alpha) * z[j] + alpha * x;
            else
              x = x + (z[j] - anchors[i][j]);
          }
        if (deferred)
          f = (f + 1) % F;  // its snapshot in the next round (after step k - tau)
        else
          snapshot((f + 1) % F);
        snapshot_due = deferred;
      } else {  // Overlap-Local-SGD
        if (posted) z = abar;
        const T alpha = static_cast<T>(o.pull.alpha), mu = static_cast<T>(o.pull.anchor_momentum);
        for (std::size_t i = 0; i < N; ++i) {
          send[i].resize(d);
          for (std::size_t j = 0; j < d; ++j) {
            T& x = models[i].x[j];
            x = x - alpha * (x - z[j]);
            velocity[i][j] = mu == T(0) ? z[j] - x : mu * velocity[i][j] + (z[j] - x);
            send[i][j] = w[i] * (z[j] - velocity[i][j]);
          }
        }
        posted = true;
      }
      Models now(N);
      for (std::size_t i = 0; i < N; ++i) now[i] = models[i].x;
      history.push_back(now);
    }
    if (algo == Algo::local) {
      history.push_back(history.back());
    } else {  // the consensus
      Vec c(d);
      for (std::size_t j = 0; j < d; ++j) {
        T acc = w[0] * models[0].x[j];
        for (std::size_t i = 1; i < N; ++i) acc = acc + w[i] * models[i].x[j];
        c[j] = acc;
      }
      history.push_back(Models(N, c));
    }
    return history;
  }

  /// DiLoCo with delayed outer gradients: each round's progress, posted at the next round's
  /// start, lands at that round's end on the shared outer model; eager or delayed starts.
  std::vector<Models> run_delayed(std::size_t rounds) {
    setup();
    const std::size_t F = o.fragments.count;
    const bool eager = o.delay.start == cocod::OuterStart::eager;
    const cocod::Outer outer = o.outer.value_or(cocod::Outer::diloco());
    const T eta = static_cast<T>(outer.learning_rate), beta = static_cast<T>(outer.momentum);
    auto move = [&](T& z, T& b, T delta, bool first) {  // z = outer(z, delta)
      if (beta == T(0)) {
        z = z - eta * delta;
        return;
      }
      b = first ? delta : beta * b + delta;
      z = z - eta * (outer.nesterov ? delta + beta * b : b);
    };
    auto fbegin = [&](std::size_t f) { return f * d / F; };
    auto fsize = [&](std::size_t f) { return (f + 1) * d / F - f * d / F; };
    Vec z = models[0].x, b(d, T(0));
    Models start(N, z), own_b(N, Vec(d, T(0))), others(N, Vec(d, T(0))), send(N);
    std::vector<bool> stepped(F, false), own_stepped(F, false);
    std::size_t f = 0;
    bool pending = false, in_flight = false;
    Vec pbar;
    auto exchange_pending = [&] {
      pbar = exchange(send, Vec(fsize(f), T(0)), fbegin(f), f);
      pending = false;
      in_flight = true;
    };
    auto land = [&] {  // z, b = outer(z, b, -Pbar); eager: o += Pbar
      const std::size_t lo = fbegin(f);
      for (std::size_t j = 0; j < fsize(f); ++j) {
        move(z[lo + j], b[lo + j], -pbar[j], !stepped[f]);
        if (eager)
          for (std::size_t i = 0; i < N; ++i) others[i][lo + j] = others[i][lo + j] + pbar[j];
      }
      stepped[f] = true;
      in_flight = false;
    };
    std::vector<Models> history;
    Vec g(d);
    for (std::size_t round = 0; round < rounds; ++round) {
      for (std::size_t step = 0; step < o.options.period; ++step) {
        if (step == 0 && pending) exchange_pending();
        for (std::size_t i = 0; i < N; ++i) {
          std::vector<std::size_t> batch(M[i]);
          samplers[i].next(batch);
          models[i].loss_and_gradient(batch, g);
          sgd[i].apply(models[i].x, g, static_cast<T>(o.options.learning_rate));
        }
      }
      if (in_flight) {
        land();
        f = (f + 1) % F;
      }
      const std::size_t lo = fbegin(f);
      for (std::size_t i = 0; i < N; ++i) {  // fragment f's progress, and its restart
        send[i].assign(fsize(f), T(0));
        for (std::size_t j = 0; j < fsize(f); ++j) {
          T& x = models[i].x[lo + j];
          T& s = start[i][lo + j];
          const T sent = w[i] * (x - s);
          send[i][j] = sent;
          if (eager) {
            move(s, own_b[i][lo + j], -(others[i][lo + j] + sent), !own_stepped[f]);
            others[i][lo + j] = -sent;
          } else {
            s = z[lo + j];
          }
          x = s;
        }
      }
      if (eager) own_stepped[f] = true;
      pending = true;
      Models now(N);
      for (std::size_t i = 0; i < N; ++i) now[i] = models[i].x;
      history.push_back(now);
    }
    exchange_pending();  // finish, either start: the last round's progress lands on z
    land();
    Vec c = z;
    if (F > 1) {  // and the exact average of the progress no post carried
      for (std::size_t j = 0; j < d; ++j) {
        T acc = w[0] * (models[0].x[j] - start[0][j]);
        for (std::size_t i = 1; i < N; ++i) acc = acc + w[i] * (models[i].x[j] - start[i][j]);
        c[j] = z[j] + acc;
      }
    }
    history.push_back(Models(N, c));
    return history;
  }
};

/// The library's workers under comm::Threads: each worker's model after every round and, last,
/// after finish; `plans` (when given) gets each round's (period, hiding steps) on rank 0.
template <template <class...> class Algorithm, class... Schedule>
std::vector<Models> run_library(int n, const cocod_test::Setup& o, std::size_t rounds, std::size_t dim = 11,
                                std::vector<std::pair<std::size_t, std::size_t>>* plans = nullptr, const Schedule&... schedule) {
  const auto N = static_cast<std::size_t>(n);
  std::vector<Models> history(rounds + 1, Models(N));
  cocod::comm::Threads::run(n, [&](cocod::comm::Threads comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    Model model = make(comm.rank(), dim);
    auto opt = cocod_test::make<Algorithm<Model, cocod::comm::Threads, Schedule...>>(comm, o, schedule...);
    opt.begin(model);
    std::size_t round = 0;
    bool starts = true;
    while (round < rounds) {
      if (starts && plans && r == 0) plans->emplace_back(opt.info().period, opt.info().hiding_steps);
      opt.step(model, opt.next_batch());
      starts = opt.round_ended();
      if (starts) history[round++][r] = model.x;
    }
    opt.finish(model);
    history[rounds][r] = model.x;
  });
  return history;
}

void compare(const std::vector<Models>& expected, const std::vector<Models>& actual) {
  REQUIRE(expected.size() == actual.size());
  for (std::size_t round = 0; round < expected.size(); ++round) {
    CAPTURE(round);
    for (std::size_t i = 0; i < expected[round].size(); ++i) {
      CAPTURE(i);
      CHECK(expected[round][i] == actual[round][i]);
    }
  }
}
std::vector<Models> simulate(Algo a, int n, const cocod_test::Setup& o, std::size_t rounds,
                             std::vector<std::pair<std::size_t, std::size_t>> plans = {}) {
  Simulation s;
  s.algo = a;
  s.n = n;
  s.o = o;
  s.plans = std::move(plans);
  return s.run(rounds);
}
double max_relative(const std::vector<Models>& a, const std::vector<Models>& b) {
  double worst = 0;
  for (std::size_t r = 0; r < a.size(); ++r)
    for (std::size_t i = 0; i < a[r].size(); ++i)
      for (std::size_t j = 0; j < a[r][i].size(); ++j)
        worst = std::max(worst, std::abs(a[r][i][j] - b[r][i][j]) / std::max(1e-300, std::abs(a[r][i][j])));
  return worst;
}

cocod_test::Setup base(std::size_t period, std::vector<double> speeds) {
  return {{.learning_rate = 0.03, .period = period, .batch_size = 5, .speeds = std::move(speeds), .seed = 31}, {.momentum = 0.9}};
}
}  // namespace

TEST_CASE("Local-SGD with an outer optimizer (SlowMo, DiLoCo) matches a plain recomputation") {
  for (const cocod::Outer outer : {cocod::Outer::diloco(), cocod::Outer::slowmo(), cocod::Outer{0.5, 0.0, false}}) {
    CAPTURE(outer.momentum);
    auto o = base(3, {1.0, 2.0, 1.5});
    o.outer = outer;
    const auto expected = simulate(Algo::local, 3, o, 5);
    compare(expected, run_library<cocod::LocalSGD>(3, o, 5));
  }
}

TEST_CASE("CoCoD-SGD with an outer optimizer matches a plain recomputation") {
  auto o = base(4, {1.0, 1.0, 2.0});
  o.outer = cocod::Outer::diloco();
  compare(simulate(Algo::cocod, 3, o, 6), run_library<cocod::Optimizer>(3, o, 6));
  o.outer = cocod::Outer{0.8, 0.5, false};
  o.options.speeds = {1.0, 3.0};
  compare(simulate(Algo::cocod, 2, o, 5), run_library<cocod::Optimizer>(2, o, 5));
}

TEST_CASE("DiLoCo with delayed outer gradients matches a plain recomputation: eager and delayed, with outer, int8, fragments") {
  for (const auto start : {cocod::OuterStart::eager, cocod::OuterStart::delayed}) {
    const std::string name = cocod::to_string(start);
    CAPTURE(name);
    auto o = base(3, {1.0, 2.0, 1.5});
    o.delay.start = start;
    auto check = [&](int n, const cocod_test::Setup& s, std::size_t rounds) {
      Simulation sim;
      sim.n = n;
      sim.o = s;
      compare(sim.run_delayed(rounds), run_library<cocod::DelayedDiLoCo>(n, s, rounds));
    };
    SUBCASE("DiLoCo's outer step (the default), 3 workers of unequal batches") { check(3, o, 6); }
    SUBCASE("SlowMo's outer step, 2 workers") {
      o.outer = cocod::Outer::slowmo();
      o.options.speeds = {1.0, 3.0};
      check(2, o, 5);
    }
    SUBCASE("outer lr 0.8 without momentum, 4 workers") {
      o.outer = cocod::Outer{0.8, 0.0, false};
      o.options.speeds = {1.0, 1.0, 2.0, 1.0};
      check(4, o, 5);
    }
    SUBCASE("int8, block 4") {
      o.compress = {cocod::Compression::int8, 4};
      check(3, o, 6);
    }
    SUBCASE("three fragments, and four of unequal size with int8") {
      o.fragments.count = 3;
      check(3, o, 7);
      o.fragments.count = 4;
      o.compress = {cocod::Compression::int8, 4};
      o.options.speeds = {1.0, 2.0};
      check(2, o, 9);
    }
  }
}

// The weighted average of the workers' consensus shares at each round end of one run, and the
// model finish() leaves after that many rounds in another.
std::pair<Models, Models> shares_and_finishes(int n, const cocod_test::Setup& o, std::size_t rounds) {
  Models average(rounds, Vec(11, T(0))), finished(rounds);
  std::mutex m;
  cocod::comm::Threads::run(n, [&](cocod::comm::Threads comm) {
    Model model = make(comm.rank());
    auto opt = cocod_test::make<cocod::DelayedDiLoCo<Model, cocod::comm::Threads>>(comm, o);
    opt.begin(model);
    Vec share(11);
    for (std::size_t round = 0; round < rounds;) {
      opt.step(model, opt.next_batch());
      if (!opt.round_ended()) continue;
      opt.consensus_share(model, share);
      const std::lock_guard lock(m);
      for (std::size_t j = 0; j < 11; ++j) average[round][j] += opt.info().weight * share[j];
      ++round;
    }
    opt.finish(model);
  });
  for (std::size_t r = 0; r < rounds; ++r) finished[r] = run_library<cocod::DelayedDiLoCo>(n, o, r + 1).back()[0];
  return {average, finished};
}

TEST_CASE("Delayed DiLoCo: each round end's consensus shares average to the model finish() would leave there, eager and "
          "delayed") {
  for (const auto start : {cocod::OuterStart::eager, cocod::OuterStart::delayed}) {
    const std::string name = cocod::to_string(start);
    CAPTURE(name);
    auto o = base(3, {1.0, 2.0, 1.5});
    o.delay.start = start;
    auto check = [&](int n, const cocod_test::Setup& s) {
      const auto [average, finished] = shares_and_finishes(n, s, 5);
      for (std::size_t r = 0; r < average.size(); ++r) {
        CAPTURE(r);
        for (std::size_t j = 0; j < average[r].size(); ++j) CHECK(average[r][j] == doctest::Approx(finished[r][j]).epsilon(1e-12));
      }
    };
    SUBCASE("DiLoCo's outer step, 3 workers of unequal batches") { check(3, o); }
    SUBCASE("plain averaging, 2 workers") {
      o.outer = cocod::Outer{1.0, 0.0, false};
      o.options.speeds = {1.0, 3.0};
      check(2, o);
    }
    SUBCASE("three fragments") {
      o.fragments.count = 3;
      check(3, o);
    }
  }
}

TEST_CASE("consensus_share(): an out of another size is refused naming it; under Delayed-DiLoCo, a call while its exchange is "
          "in flight too; elsewhere it is the parameters") {
  cocod::comm::Threads::run(1, [&](cocod::comm::Threads comm) {
    Model model = make(0);
    auto o = base(3, {1.0});
    auto opt = cocod_test::make<cocod::DelayedDiLoCo<Model, cocod::comm::Threads>>(comm, o);
    opt.begin(model);
    Vec wrong(10), share(11);
    CHECK_THROWS_WITH_AS(opt.consensus_share(model, wrong),
                         "cocod: consensus_share(): out must have 11 values, one a parameter (got 10)", std::invalid_argument);
    for (int i = 0; i < 4; ++i) opt.step(model, opt.next_batch());  // the first step of round 1 posted round 0's progress
    CHECK_THROWS_AS(opt.consensus_share(model, share), std::logic_error);
    auto local = cocod_test::make<cocod::LocalSGD<Model, cocod::comm::Threads>>(comm, o);
    Model other = make(0);
    local.begin(other);
    local.step(other, local.next_batch());
    local.consensus_share(other, share);
    CHECK(share == other.x);
  });
}

TEST_CASE("With one worker, delayed DiLoCo's eager start is Local-SGD with the outer step bit for bit, at every round") {
  for (const cocod::Outer outer : {cocod::Outer::diloco(), cocod::Outer::slowmo(), cocod::Outer{0.5, 0.0, false}}) {
    CAPTURE(outer.momentum);
    auto o = base(3, {1.0});
    o.outer = outer;
    compare(run_library<cocod::LocalSGD>(1, o, 6), run_library<cocod::DelayedDiLoCo>(1, o, 6));
    o.delay.start = cocod::OuterStart::delayed;  // the naive delay is not: round 0's progress waits a round
    CHECK(run_library<cocod::LocalSGD>(1, o, 6)[0] != run_library<cocod::DelayedDiLoCo>(1, o, 6)[0]);
  }
}

TEST_CASE("Delayed DiLoCo's eager start uses the worker's fresh progress: after one round it differs from the delayed start, "
          "whose workers all restart from the shared model") {
  auto o = base(3, {1.0, 2.0});
  o.delay.start = cocod::OuterStart::delayed;
  const auto naive = run_library<cocod::DelayedDiLoCo>(2, o, 3);
  o.delay.start = cocod::OuterStart::eager;
  const auto eager = run_library<cocod::DelayedDiLoCo>(2, o, 3);
  const Vec x0 = make(0).x;
  CHECK(naive[0][0] == x0);  // round 0's progress is in flight: the delayed start waits a round for it
  CHECK(naive[0][1] == x0);
  CHECK(eager[0][0] != x0);  // the eager start steps on w_i P_i(0) at once
  CHECK(eager[0][0] != eager[0][1]);
  CHECK(naive[1][0] == naive[1][1]);  // the shared outer model, the same bits on every worker
}

TEST_CASE("Overlap-Local-SGD matches a plain recomputation") {
  auto o = base(3, {1.0, 2.0, 1.0});
  SUBCASE("the authors' defaults: alpha 0.2, no anchor momentum") {}
  SUBCASE("alpha 0.6, anchor momentum 0.7") {
    o.pull.alpha = 0.6;
    o.pull.anchor_momentum = 0.7;
  }
  const auto expected = simulate(Algo::overlap, 3, o, 6);
  compare(expected, run_library<cocod::OverlapLocalSGD>(3, o, 6));
  CHECK(expected[3][0] != expected[3][1]);  // the models are pulled, never replaced
}

TEST_CASE("Streamed fragments match a plain recomputation: add-back and lerp, with and without an outer optimizer") {
  auto o = base(2, {1.0, 1.0, 1.0});
  o.fragments.count = 3;
  SUBCASE("add-back") {}
  SUBCASE("lerp 0.5") { o.fragments.merge = cocod::FragmentMerge::lerp; }
  SUBCASE("add-back, DiLoCo's outer step") { o.outer = cocod::Outer::diloco(); }
  SUBCASE("lerp 0, Nesterov outer step") {
    o.fragments.merge = cocod::FragmentMerge::lerp;
    o.fragments.alpha = 0.0;
    o.outer = cocod::Outer{0.7, 0.5, true};
  }
  SUBCASE("four fragments of unequal size") { o.fragments.count = 4; }
  compare(simulate(Algo::cocod, 3, o, 8), run_library<cocod::Optimizer>(3, o, 8));
}

TEST_CASE("Compressed exchange with error feedback matches a plain recomputation, every format") {
  for (const auto format : {cocod::Compression::bf16, cocod::Compression::fp16, cocod::Compression::int8}) {
    const std::string format_name = cocod::compress::name(format);
    CAPTURE(format_name);
    auto o = base(3, {1.0, 2.0, 1.5});
    o.compress.format = format;
    o.compress.block = 4;
    compare(simulate(Algo::local, 3, o, 5), run_library<cocod::LocalSGD>(3, o, 5));
    compare(simulate(Algo::cocod, 3, o, 5), run_library<cocod::Optimizer>(3, o, 5));
    compare(simulate(Algo::overlap, 3, o, 5), run_library<cocod::OverlapLocalSGD>(3, o, 5));
    o.outer = cocod::Outer::diloco();
    o.fragments.count = 2;
    compare(simulate(Algo::cocod, 3, o, 6), run_library<cocod::Optimizer>(3, o, 6));
    o.options.speeds = {1.0, 1.0};
    compare(simulate(Algo::cocod, 2, o, 6), run_library<cocod::Optimizer>(2, o, 6));
  }
}

TEST_CASE("An outer optimizer of lr 1 and no momentum is the plain algorithm, to rounding") {
  for (const int n : {1, 3}) {
    auto o = base(3, std::vector<double>(static_cast<std::size_t>(n), 1.0));
    const auto plain_local = run_library<cocod::LocalSGD>(n, o, 6);
    const auto plain_cocod = run_library<cocod::Optimizer>(n, o, 6);
    o.outer = cocod::Outer{1.0, 0.0, false};
    const auto local = run_library<cocod::LocalSGD>(n, o, 6);
    const auto cocod_outer = run_library<cocod::Optimizer>(n, o, 6);
    CHECK(max_relative(plain_local, local) < 1e-12);
    CHECK(max_relative(plain_cocod, cocod_outer) < 1e-12);
  }
}

TEST_CASE("Overlap depth: every tau matches a plain recomputation, with outer, compression and fragments") {
  auto o = base(4, {1.0, 2.0, 1.5});
  SUBCASE("plain") {}
  SUBCASE("DiLoCo's outer step") { o.outer = cocod::Outer::diloco(); }
  SUBCASE("int8, block 4") {
    o.compress.format = cocod::Compression::int8;
    o.compress.block = 4;
  }
  SUBCASE("two fragments, lerp") {
    o.fragments.count = 2;
    o.fragments.merge = cocod::FragmentMerge::lerp;
  }
  SUBCASE("SlowMo's outer step, int8 and three fragments") {
    o.outer = cocod::Outer::slowmo();
    o.compress.format = cocod::Compression::int8;
    o.compress.block = 4;
    o.fragments.count = 3;
  }
  for (const std::size_t tau : {0, 1, 2, 3, 4, 9}) {
    CAPTURE(tau);
    o.depth.steps = tau;
    compare(simulate(Algo::cocod, 3, o, 6), run_library<cocod::Optimizer>(3, o, 6));
  }
}

TEST_CASE("OverlapDepth's tau: fixed steps capped at k; automatic: the measured hiding steps capped at k, k until measured") {
  const cocod::OverlapDepth three{3}, whole{}, automatic{cocod::OverlapDepth::automatic};
  CHECK(three.at(8) == 3);
  CHECK(three.at(8, 5) == 3);  // a fixed depth ignores what was measured
  CHECK(three.at(2) == 2);
  CHECK(!three.whole(8));
  CHECK(three.whole(3));
  CHECK(whole.at(8, 2) == 8);
  CHECK(whole.whole(1000000, 2));
  CHECK(automatic.at(6, 2) == 2);
  CHECK(automatic.at(2, 5) == 2);
  CHECK(automatic.at(4, 0) == 4);  // not measured: the whole round
  CHECK(automatic.whole(4, 0));
  CHECK(!automatic.whole(6, 2));
  CHECK(automatic.whole(3, 3));
  CHECK(automatic.is_automatic());
  CHECK(!whole.is_automatic());
}

TEST_CASE("Overlap depth under a schedule that re-plans: periods and automatic depths change between rounds, and "
          "every round matches a plain recomputation across whole and partial overlaps") {
  auto o = base(4, {1.0, 2.0, 1.5});
  SUBCASE("plain") {}
  SUBCASE("DiLoCo's outer step, int8 and two fragments") {
    o.outer = cocod::Outer::diloco();
    o.compress.format = cocod::Compression::int8;
    o.compress.block = 4;
    o.fragments.count = 2;
  }
  // (period, hiding steps): unmeasured, then tau 2 of 6, a whole round of 2, tau 1 of 5, tau 3 of 3
  const cocod_test::Scripted schedule{{{4, 0}, {6, 2}, {2, 5}, {5, 1}, {3, 3}}};
  for (const std::size_t steps : {cocod::OverlapDepth::automatic, std::size_t{2}}) {
    CAPTURE(steps);
    o.depth.steps = steps;
    std::vector<std::pair<std::size_t, std::size_t>> plans;
    const auto library = run_library<cocod::Optimizer>(3, o, 12, 11, &plans, schedule);
    REQUIRE(plans.size() == 12);
    std::size_t whole_then_partial = 0, partial_then_whole = 0;
    for (std::size_t r = 1; r < plans.size(); ++r) {
      const bool before = o.depth.whole(plans[r - 1].first, plans[r - 1].second), now = o.depth.whole(plans[r].first, plans[r].second);
      whole_then_partial += before && !now;
      partial_then_whole += !before && now;
    }
    CHECK(whole_then_partial >= 2);  // the run crosses both ways, more than once
    CHECK(partial_then_whole >= 2);
    compare(simulate(Algo::cocod, 3, o, 12, plans), library);
  }
}

TEST_CASE("Overlap depth k is CoCoD-SGD bit for bit; depth 0 is Local-SGD (and SlowMo) to rounding") {
  for (const bool outer : {false, true}) {
    CAPTURE(outer);
    auto o = base(4, {1.0, 1.0, 2.0});
    if (outer) o.outer = cocod::Outer::slowmo();
    const auto whole = run_library<cocod::Optimizer>(3, o, 6);
    o.depth.steps = 4;
    compare(whole, run_library<cocod::Optimizer>(3, o, 6));
    o.depth.steps = 0;
    const auto depth0 = run_library<cocod::Optimizer>(3, o, 6);
    const auto local = run_library<cocod::LocalSGD>(3, o, 6);
    const double d = max_relative(local, depth0);
    MESSAGE("depth 0 against Local-SGD" << std::string(outer ? " with SlowMo" : "") << ": max relative difference " << d);
    CHECK(d < 1e-12);
    CHECK(max_relative(whole, depth0) > 1e-6);  // a whole round's overlap is another algorithm
  }
}

TEST_CASE("With one worker: fragments are serial SGD bit for bit; Local-SGD's outer step is the serial outer step") {
  const auto o = base(3, {1.0});
  const auto serial = run_library<cocod::Optimizer>(1, o, 8);  // plain CoCoD-SGD with N = 1 is serial SGD
  auto f = o;
  f.fragments.count = 4;
  compare(serial, run_library<cocod::Optimizer>(1, f, 8));
  auto outer = o;
  outer.outer = cocod::Outer::diloco();
  compare(simulate(Algo::local, 1, outer, 6), run_library<cocod::LocalSGD>(1, outer, 6));
}

TEST_CASE("The family's settings are validated, naming the field; a setting an algorithm does not take does not compile") {
  cocod::comm::Local comm;
  using M = Model;
  using L = cocod::comm::Local;
  static_assert(std::is_constructible_v<cocod::CoCoDSGD<M, L>, L, cocod::Options, cocod::Outer, cocod::Compress, cocod::Fragments>);
  static_assert(std::is_constructible_v<cocod::LocalSGD<M, L>, L, cocod::Options, cocod::Compress, cocod::Outer, cocod::update::Sgd>);
  static_assert(std::is_constructible_v<cocod::OverlapLocalSGD<M, L>, L, cocod::Options, cocod::PullBack, cocod::Compress>);
  static_assert(!std::is_constructible_v<cocod::SyncSGD<M, L>, L, cocod::Options, cocod::Outer>);
  static_assert(!std::is_constructible_v<cocod::PipeSGD<M, L>, L, cocod::Options, cocod::Compress>);
  static_assert(!std::is_constructible_v<cocod::LocalSGD<M, L>, L, cocod::Options, cocod::Fragments>);
  static_assert(!std::is_constructible_v<cocod::OverlapLocalSGD<M, L>, L, cocod::Options, cocod::Outer>);
  static_assert(!std::is_constructible_v<cocod::CoCoDSGD<M, L>, L, cocod::Options, cocod::PullBack>);
  static_assert(std::is_constructible_v<cocod::DelayedDiLoCo<M, L>, L, cocod::Options, cocod::Delay, cocod::Outer, cocod::Compress,
                                        cocod::Fragments>);
  static_assert(!std::is_constructible_v<cocod::DelayedDiLoCo<M, L>, L, cocod::Options, cocod::OverlapDepth>);
  static_assert(!std::is_constructible_v<cocod::DelayedDiLoCo<M, L>, L, cocod::Options, cocod::PullBack>);
  static_assert(!std::is_constructible_v<cocod::CoCoDSGD<M, L>, L, cocod::Options, cocod::Delay>);
  CHECK_THROWS_WITH_AS((cocod::DelayedDiLoCo<M, L>{comm, {}, cocod::Fragments{.count = 2, .merge = cocod::FragmentMerge::lerp}}),
                       "cocod::Fragments: merge must be add_back under DiLoCo with delayed outer gradients, where each fragment "
                       "restarts when it is posted (got lerp)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS((cocod::DelayedDiLoCo<M, L>{comm, {}, cocod::Delay{static_cast<cocod::OuterStart>(7)}}),
                       "cocod::Delay: start must be OuterStart::eager or OuterStart::delayed (got 7)", std::invalid_argument);
  CHECK_THROWS_WITH_AS((cocod::DelayedDiLoCo<M, L>{comm, {}, cocod::Outer{0.7, 1.0, true}}),
                       "cocod::Outer: momentum must be in [0, 1) (got 1)", std::invalid_argument);
  CHECK_THROWS_WITH_AS((cocod::CoCoDSGD<M, L>{comm, {}, cocod::Outer{0.0}}),
                       "cocod::Outer: learning_rate must be a finite number > 0 (got 0)", std::invalid_argument);
  CHECK_THROWS_WITH_AS((cocod::LocalSGD<M, L>{comm, {}, cocod::Outer{1.0, 0.0, true}}),
                       "cocod::Outer: nesterov needs momentum > 0 (got nesterov = true, momentum = 0)", std::invalid_argument);
  CHECK_THROWS_WITH_AS((cocod::CoCoDSGD<M, L>{comm, {}, cocod::Compress{.block = 0}}),
                       "cocod::Compress: block must be >= 1 (got 0)", std::invalid_argument);
  CHECK_THROWS_WITH_AS((cocod::CoCoDSGD<M, L>{comm, {}, cocod::Fragments{.count = 2, .alpha = 1.5}}),
                       "cocod::Fragments: alpha must be in [0, 1] (got 1.5)", std::invalid_argument);
  CHECK_THROWS_WITH_AS((cocod::CoCoDSGD<M, L>{comm, {}, cocod::Fragments{.merge = cocod::FragmentMerge::lerp}}),
                       doctest::Contains("cocod::Fragments: merge lerp needs count > 1"), std::invalid_argument);
  CHECK_THROWS_WITH_AS((cocod::OverlapLocalSGD<M, L>{comm, {}, cocod::PullBack{.alpha = 0.0}}),
                       "cocod::PullBack: alpha must be in (0, 1] (got 0)", std::invalid_argument);
  CHECK_THROWS_WITH_AS((cocod::OverlapLocalSGD<M, L>{comm, {}, cocod::PullBack{.anchor_momentum = 1.0}}),
                       "cocod::PullBack: anchor_momentum must be in [0, 1) (got 1)", std::invalid_argument);
  Model model = make(0, 3);
  cocod::CoCoDSGD<M, L> opt{comm, {}, cocod::Fragments{.count = 4}};
  CHECK_THROWS_WITH_AS(opt.begin(model), "cocod::Fragments: count must be at most the parameter count (3) (got 4)",
                       std::invalid_argument);
  cocod::DelayedDiLoCo<M, L> delayed{comm, {}, cocod::Fragments{.count = 4}};
  CHECK_THROWS_WITH_AS(delayed.begin(model), "cocod::Fragments: count must be at most the parameter count (3) (got 4)",
                       std::invalid_argument);
  cocod::CoCoDSGD<M, L> fixed{comm, {}, cocod::OverlapDepth{cocod::OverlapDepth::automatic}};
  CHECK_THROWS_WITH_AS(fixed.begin(model),
                       "cocod::OverlapDepth: steps OverlapDepth::automatic needs a measuring schedule such as "
                       "schedule::Adaptive (got a schedule that does not measure)",
                       std::invalid_argument);
}

TEST_CASE("A compressed exchange's bytes are its encoded blocks, and its time covers both collectives (what --period auto measures)") {
  // 2 workers, 11 parameters, int8 in blocks of 4: slices of 6; per collective one block to the
  // other worker: phase 1 carries the control slots too
  const int n = 2;
  auto o = base(2, {1.0, 1.0});
  o.compress.format = cocod::Compression::int8;
  o.compress.block = 4;
  const cocod::comm::Link link{.latency = 0.02, .bandwidth = 1e12};
  std::vector<cocod::Report> reports(n);
  std::size_t control = 0;
  cocod::comm::Threads::run(n, [&](cocod::comm::Threads inner) {
    cocod::comm::Throttled<cocod::comm::Threads> comm{inner, link};
    Model model = make(inner.rank());
    auto opt = cocod_test::make<cocod::Optimizer<Model, decltype(comm)>>(comm, o);
    reports[static_cast<std::size_t>(inner.rank())] = opt.optimize(model, cocod::Steps{8});
  });
  control = 4 + n + 2 * n + 1;  // loss, unsent weight, votes; steps; the non-finite guard
  const double block2 = static_cast<double>(cocod::compress::encoded_bytes(cocod::Compression::int8, 6, 4, sizeof(T)));
  const double block1 = block2 + static_cast<double>(control * sizeof(T));
  for (const auto& report : reports) {
    REQUIRE(report.rounds.size() == 4);
    for (const auto& r : report.rounds) {
      CHECK(r.bytes_sent == (n - 1) * (block1 + block2));
      CHECK(r.comm_s >= 2 * (n - 1) * link.latency);  // the link's cost of both collectives (a lower bound)
    }
  }
  // streamed fragments send a fragment a round; the uncompressed ring all-reduce 2 (N - 1) / N of its buffer
  auto f = base(2, {1.0, 1.0});
  f.fragments.count = 3;  // 11 parameters: fragments of 3, 4 and 4
  cocod::comm::Threads::run(n, [&](cocod::comm::Threads comm) {
    Model model = make(comm.rank());
    auto opt = cocod_test::make<cocod::Optimizer<Model, cocod::comm::Threads>>(comm, f);
    reports[static_cast<std::size_t>(comm.rank())] = opt.optimize(model, cocod::Steps{6});
  });
  const std::size_t sizes[] = {3, 4, 4};
  for (std::size_t r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(reports[0].rounds[r].bytes_sent == 2.0 * (n - 1) / n * static_cast<double>((sizes[r] + control) * sizeof(T)));
  }
}
