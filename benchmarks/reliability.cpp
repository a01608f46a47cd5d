// What reliability costs, as a fraction of a round: a checkpoint (Optimizer::save, every worker
// writing its file with fsync, then the manifest) and the non-finite guard (one all_finite pass
// over the contribution per reduction), for CoCoD-SGD on in-process workers; then a soak: many
// rounds of a small model with resident memory and time per round read at the start and the end.
//
//   reliability [--parameters P] [--workers N] [--period K] [--rounds R] [--soak-rounds S] [--dir D]
//
// The rounds of the costed runs are timed by the run itself (RoundStats::round_s, medians); the
// checkpoint and the check are timed around their calls in the same process, so the ratios come
// from one run. Correctness: the run with a checkpoint every round ends with the same model as
// the run without (bitwise), and the resumed run from its last checkpoint too.
#include <cocod.hpp>
#include <cocod/checkpoint.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli.hpp"  // examples/common: the command-line checks
#include "common/table.hpp"

namespace {
using T = float;

/// f(x) = 0.5 |x - c_i|^2 per sample, with a little work per parameter (a dense model's step).
struct Quadratic {
  std::vector<T> x;
  int rank = 0;
  std::span<T> parameters() { return x; }
  std::size_t num_samples() const { return 256; }
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<T> g) {
    double loss = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      T sum = 0;
      for (const auto s : batch) sum += x[i] - T(0.001) * static_cast<T>((s * 7 + i + static_cast<std::size_t>(rank)) % 13);
      g[i] = sum / static_cast<T>(batch.size());
      loss += 0.5 * static_cast<double>(g[i]) * static_cast<double>(g[i]);
    }
    return loss / static_cast<double>(x.size());
  }
};

double resident_mib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  return 0.0;
}
}  // namespace

int main(int argc, char** argv) {
  std::size_t parameters = 1 << 20, period = 8, rounds = 30, soak_rounds = 100000;
  int workers = 2;
  std::string dir = (std::filesystem::temp_directory_path() / "cocod-bench-reliability").string();
  CLI::App app("What checkpoints and the non-finite guard cost, as a fraction of a round; and a soak.");
  cli::last_value_wins(app);
  app.add_option("--parameters", parameters, "model size")->check(cli::whole(1, 1ull << 28))->capture_default_str();
  app.add_option("--workers", workers, "in-process workers")->check(cli::whole(1, 64))->capture_default_str();
  app.add_option("--period", period, "local steps per round")->check(cli::whole(1, 1000))->capture_default_str();
  app.add_option("--rounds", rounds, "rounds of the costed runs")->check(cli::whole(3, 100000))->capture_default_str();
  app.add_option("--soak-rounds", soak_rounds, "rounds of the soak (0: none)")->check(cli::whole(0, 100000000))->capture_default_str();
  app.add_option("--dir", dir, "where the checkpoints go")->check(cli::writable_folder())->capture_default_str();
  cli::parse(app, argc, argv);

  using Opt = cocod::Optimizer<Quadratic, cocod::comm::Threads>;
  const cocod::Options options{.learning_rate = 0.1, .period = period, .batch_size = 4};
  const cocod::update::Sgd sgd{.momentum = 0.9};
  struct Run {
    double round_s = 0, save_s = 0, check_s = 0;
    std::string digest;
  };
  // mode 0: no checkpoint; 1: a checkpoint every round (timed); 2: resumed from the last one
  auto run = [&](int mode, const cocod::Checkpoints& store) {
    Run out;
    std::vector<double> saves, checks;
    cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
      Quadratic model{std::vector<T>(parameters, T(1)), comm.rank()};
      Opt opt{comm, options, sgd};
      if (mode == 2)
        opt.resume(model, store, cocod::Rounds{rounds});
      else
        opt.begin(model, cocod::Rounds{rounds});
      while (opt.steps_taken() < rounds * period) {
        opt.step(model, opt.next_batch());
        if (!opt.round_ended()) continue;
        if (comm.rank() == 0) {  // the guard's pass, on a buffer of the model's size
          const auto t0 = std::chrono::steady_clock::now();
          const bool finite = cocod::backend::all_finite(cocod::backend::cpu{}, std::span<const T>(model.x));
          checks.push_back(bench::seconds_since(t0) + (finite ? 0.0 : 1e9));
        }
        if (mode == 1 && opt.steps_taken() < rounds * period) {
          const auto t0 = std::chrono::steady_clock::now();
          opt.save(model, store);
          if (comm.rank() == 0) saves.push_back(bench::seconds_since(t0));
        }
      }
      const auto report = opt.finish(model);
      if (comm.rank() == 0) {
        out.round_s = report.median_round_s();
        out.digest = cocod::model_digest(model);
      }
    });
    out.save_s = saves.empty() ? 0.0 : bench::median(saves);
    out.check_s = bench::median(checks);
    return out;
  };

  std::filesystem::remove_all(dir);
  const cocod::Checkpoints store(dir);
  const Run plain = run(0, store), saved = run(1, store), resumed = run(2, store);
  const bool same = plain.digest == saved.digest && plain.digest == resumed.digest;
  const double file_mib = static_cast<double>(std::filesystem::file_size(store.latest()->file(0))) / (1 << 20);
  bench::Table table("CoCoD-SGD, " + std::to_string(workers) + " workers (threads), " + std::to_string(parameters) +
                         " float parameters, k = " + std::to_string(period) + ", momentum; medians over " +
                         std::to_string(rounds) + " rounds",
                     {{"what", "", 24, -1}, {"time", "ms", 10, 3}, {"of_a_round", "", 10, 4}, {"file", "MiB", 8, 2},
                      {"same_model", "", 10, -1}});
  table.row({"round (no checkpoint)", table.number(1, plain.round_s * 1e3), table.number(2, 1.0), "", same ? "yes" : "NO"}, same);
  table.row({"checkpoint (save)", table.number(1, saved.save_s * 1e3), table.number(2, saved.save_s / plain.round_s),
             table.number(3, file_mib), same ? "yes" : "NO"},
            same);
  table.row({"non-finite check", table.number(1, plain.check_s * 1e3), table.number(2, plain.check_s / plain.round_s), "",
             same ? "yes" : "NO"},
            same);
  std::filesystem::remove_all(dir);

  if (soak_rounds > 0) {  // a small model for many rounds: memory and time per round stay flat
    double rss_start = 0, rss_end = 0, early_s = 0, late_s = 0;
    cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
      Quadratic model{std::vector<T>(64, T(1)), comm.rank()};
      cocod::Optimizer<Quadratic, cocod::comm::Threads> opt{
          comm, {.learning_rate = 0.1, .period = 2, .batch_size = 2, .report_rounds = 1000}, cocod::update::Sgd{.momentum = 0.9}};
      opt.begin(model, cocod::Rounds{soak_rounds});
      const std::size_t warm = soak_rounds / 10;
      std::vector<double> last(1000, 0.0);  // the latest rounds' times, a ring
      std::size_t seen = 0;
      auto window_s = [&] { return bench::median(std::vector<double>(last.begin(), last.begin() + static_cast<std::ptrdiff_t>(std::min(seen, last.size())))); };
      while (opt.steps_taken() < soak_rounds * 2) {
        opt.step(model, opt.next_batch());
        if (comm.rank() != 0 || !opt.round_ended()) continue;
        last[seen++ % last.size()] = opt.last_round().round_s;
        if (opt.last_round().round + 1 == warm) {
          rss_start = resident_mib();
          early_s = window_s();
        }
      }
      if (comm.rank() == 0) {
        rss_end = resident_mib();
        late_s = window_s();
      }
      (void)opt.finish(model);
    });
    const bool flat = rss_end - rss_start < 1.0;
    bench::Table soak("soak: " + std::to_string(soak_rounds) + " rounds of a 64-parameter model, " + std::to_string(workers) +
                          " workers; after the first tenth and at the end",
                      {{"what", "", 24, -1}, {"after_warmup", "", 12, 3}, {"at_end", "", 12, 3}, {"growth", "", 10, 3},
                       {"flat", "", 6, -1}});
    soak.row({"resident memory (MiB)", soak.number(1, rss_start), soak.number(2, rss_end), soak.number(3, rss_end - rss_start),
              flat ? "yes" : "NO"},
             flat);
    soak.row({"round (ms, median)", soak.number(1, early_s * 1e3), soak.number(2, late_s * 1e3),
              soak.number(3, late_s / early_s), "-"},
             true);
    std::printf("# target: resident memory grows by under 1 MiB after warm-up: %s\n", flat ? "met" : "NOT met");
    soak.finish("soak");
  }
  return table.finish("reliability");
}
