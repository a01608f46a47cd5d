#pragma once
// Shared by the examples: the command line, the run of each algorithm on in-process workers
// over a throttled link (or MPI processes, or GPUs over NCCL), slowed workers, the adaptive
// schedule, the Chrome trace, the accuracy-against-time curve and the summary table. Example
// code, not part of the library.
#include <cocod.hpp>
#ifdef COCOD_HAS_MPI
#include <cocod/comm/mpi.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace example {

/// A learning rate chosen at run time: constant, or cosine decay to 0 over the run.
struct LearningRate {
  bool cosine = false;
  void validate() const {}
  [[nodiscard]] double operator()(double base, std::size_t t, std::size_t total) const {
    return cosine ? cocod::lr::Cosine{}(base, t, total) : base;
  }
};
using Schedule = cocod::schedule::Adaptive<LearningRate>;

struct Args {
  std::vector<std::string> algorithms{"cocod", "ssgd", "local", "pipe"};
  int workers = 2;
  std::size_t period = 8;
  double bandwidth_gbit = 1.0;
  std::optional<double> latency_us = 50.0;  // nullopt: "auto"
  std::uint64_t seed = 1;
  double epochs = 3;
  double learning_rate = 0.05;
  double momentum = 0.0;
  std::size_t batch = 256;
  std::string csv;
  bool progress = true;
  std::string comm = "threads";  // or "mpi": one worker per MPI process
  std::string mpi_progress = "polling_thread";
  bool mpi_native = false;       // MPI's own all-reduce instead of the rank-ordered one
  double mpi_poll_us = 500;      // polling thread's longest sleep between MPI_Test calls
  bool link_given = false;       // --bandwidth or --latency on the command line
  std::size_t dim = 0;           // example-specific sizes (0: the example's default)
  std::size_t samples = 0;
  bool auto_period = false;      // --period auto: the smallest k with k*c >= m, re-measured
  std::size_t max_period = 32;
  std::vector<std::string> samplings{"equal"};  // and/or "proportional" (from measured speeds)
  std::vector<double> slowdown;  // per rank, 1 = normal speed (empty: nobody slowed)
  bool cosine = false;           // --lr-schedule cosine
  std::string trace;             // Chrome trace file
  std::string curve;             // CSV of the metrics against wall time
  double curve_every = 0.5;      // epochs between two points of the curve
  bool brief = false;            // the short table (the demo's)
  double comm_ratio = 1.0;       // --compute-ratio: with --latency auto, m = k*c / comm_ratio
};

[[noreturn]] inline void usage_error(const std::string& program, const std::string& message) {
  std::fprintf(stderr, "%s: %s\nTry '%s --help'.\n", program.c_str(), message.c_str(), program.c_str());
  std::exit(2);
}

inline std::string latency_text(const std::optional<double>& us) {
  if (!us) return "auto";
  std::ostringstream os;
  os << *us;
  return os.str();
}

inline std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}
inline std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& item : items) s += (s.empty() ? "" : ",") + item;
  return s;
}

/// Parses the common flags; prints --help and exits. `what` is the example's one-line summary.
inline Args parse(int argc, char** argv, const char* what, Args defaults) {
  Args a = std::move(defaults);
  const std::string program = argc > 0 ? argv[0] : "example";
  auto value = [&](int& i, const std::string& flag) -> std::string {
    if (i + 1 >= argc) usage_error(program, "option " + flag + " needs a value");
    return argv[++i];
  };
  auto number = [&](const std::string& flag, const std::string& text, double min) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < min) {
      std::ostringstream os;
      os << "option " << flag << " needs a number >= " << min << " (got '" << text << "')";
      usage_error(program, os.str());
    }
    return v;
  };
  auto integer = [&](const std::string& flag, const std::string& text, double min) {
    const double v = number(flag, text, min);
    if (v != std::floor(v) || v > 1e15) usage_error(program, "option " + flag + " needs a whole number (got '" + text + "')");
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "%s\n\nUsage: %s [options]\n"
          "  --algo LIST        algorithms to run, comma-separated: cocod,ssgd,local,pipe or all (default: all)\n"
          "  --comm threads|mpi|nccl  in-process workers, one worker per MPI process under\n"
          "                     mpiexec, or one per GPU over NCCL (CUDA example) (default: threads)\n"
          "  --workers N        in-process workers with --comm threads (default: %d)\n"
          "  --period K|auto    local steps per round, or 'auto': the smallest k with k*compute >= one\n"
          "                     all-reduce, measured and re-checked during the run (default: %s)\n"
          "  --max-period K     the largest k that --period auto may choose (default: %zu)\n"
          "  --sampling LIST    equal, proportional or both (comma-separated): batch sizes equal, or\n"
          "                     proportional to the workers' speeds measured during the run (default: %s)\n"
          "  --slowdown R:F,..  make worker R F times slower (it sleeps F-1 times its compute time)\n"
          "  --bandwidth GBIT   throttle collectives to a link of this bandwidth in Gbit/s (default: %g;\n"
          "                     with --comm mpi the real network is used unless --bandwidth or\n"
          "                     --latency is given)\n"
          "  --latency US|auto  link latency in microseconds; 'auto' picks it so that one all-reduce\n"
          "                     costs about K local steps (default: %s)\n"
          "  --compute-ratio R  with --latency auto: one all-reduce costs K local steps / R (default: 1)\n"
          "  --mpi-progress P   polling_thread, blocking_thread or caller (default: polling_thread)\n"
          "  --mpi-poll-us US   the polling thread's longest sleep between MPI_Test calls (default: 500)\n"
          "  --mpi-native       MPI's own all-reduce (not bitwise equal to --comm threads)\n"
          "  --dim D, --samples S   model dimension and samples per worker (example defaults)\n"
          "  --epochs E         passes over the data (default: %g)\n"
          "  --lr RATE          learning rate (default: %g)\n"
          "  --lr-schedule S    constant or cosine (decay to 0 over the run) (default: %s)\n"
          "  --momentum MU      local momentum (default: %g)\n"
          "  --batch M          mini-batch size per worker (default: %zu)\n"
          "  --seed S           seed of data and sampling (default: %llu)\n"
          "  --csv FILE         also write the per-round log of every algorithm to FILE.<algorithm>\n"
          "  --trace FILE       write a Chrome trace (chrome://tracing, ui.perfetto.dev) of every run's\n"
          "                     steps, waits and all-reduces per worker to FILE\n"
          "  --curve FILE       write the metrics of rank 0's model against wall time to FILE (CSV)\n"
          "  --curve-every E    epochs between two points of the curve (default: %g)\n"
          "  --brief            the short table: epochs, metrics, wall time, time per round and per\n"
          "                     step, time waited, speedup\n"
          "  --no-progress      no progress bars\n",
          what, program.c_str(), a.workers, a.auto_period ? "auto" : std::to_string(a.period).c_str(),
          a.max_period, join(a.samplings).c_str(), a.bandwidth_gbit,
          latency_text(a.latency_us).c_str(), a.epochs, a.learning_rate, a.cosine ? "cosine" : "constant",
          a.momentum, a.batch, static_cast<unsigned long long>(a.seed), a.curve_every);
      std::exit(0);
    } else if (flag == "--algo") {
      a.algorithms.clear();
      for (const auto& item : split(value(i, flag))) {
        if (item == "all") {
          a.algorithms = {"cocod", "ssgd", "local", "pipe"};
        } else if (item == "cocod" || item == "ssgd" || item == "local" || item == "pipe") {
          a.algorithms.push_back(item);
        } else {
          usage_error(program, "unknown algorithm '" + item + "' in --algo (choose from cocod, ssgd, local, pipe, all)");
        }
      }
      if (a.algorithms.empty()) usage_error(program, "--algo needs at least one algorithm");
    } else if (flag == "--workers") {
      a.workers = static_cast<int>(integer(flag, value(i, flag), 1));
    } else if (flag == "--period") {
      const std::string v = value(i, flag);
      a.auto_period = v == "auto";
      if (!a.auto_period && (v.empty() || v.find_first_not_of("0123456789") != std::string::npos))
        usage_error(program, "option --period needs a whole number >= 1 or 'auto' (got '" + v + "')");
      if (!a.auto_period) a.period = static_cast<std::size_t>(integer(flag, v, 1));
    } else if (flag == "--max-period") {
      a.max_period = static_cast<std::size_t>(integer(flag, value(i, flag), 1));
    } else if (flag == "--sampling") {
      a.samplings = split(value(i, flag));
      for (const auto& item : a.samplings)
        if (item != "equal" && item != "proportional")
          usage_error(program, "unknown sampling '" + item + "' in --sampling (choose equal, proportional or both)");
      if (a.samplings.empty()) usage_error(program, "--sampling needs equal, proportional or both");
    } else if (flag == "--slowdown") {
      for (const auto& item : split(value(i, flag))) {
        const auto colon = item.find(':');
        if (colon == std::string::npos) usage_error(program, "--slowdown needs RANK:FACTOR pairs, like 2:3.0 (got '" + item + "')");
        const auto rank = static_cast<std::size_t>(integer(flag, item.substr(0, colon), 0));
        const double factor = number(flag, item.substr(colon + 1), 1);
        if (a.slowdown.size() <= rank) a.slowdown.resize(rank + 1, 1.0);
        a.slowdown[rank] = factor;
      }
    } else if (flag == "--lr-schedule") {
      const std::string v = value(i, flag);
      if (v != "constant" && v != "cosine") usage_error(program, "unknown learning-rate schedule '" + v + "' (constant or cosine)");
      a.cosine = v == "cosine";
    } else if (flag == "--trace") {
      a.trace = value(i, flag);
    } else if (flag == "--curve") {
      a.curve = value(i, flag);
    } else if (flag == "--curve-every") {
      a.curve_every = number(flag, value(i, flag), 1e-3);
    } else if (flag == "--bandwidth") {
      a.bandwidth_gbit = number(flag, value(i, flag), 1e-6);
      a.link_given = true;
    } else if (flag == "--latency") {
      const std::string v = value(i, flag);
      a.latency_us = v == "auto" ? std::nullopt : std::optional<double>(number(flag, v, 0));
      a.link_given = true;
    } else if (flag == "--comm") {
      a.comm = value(i, flag);
      if (a.comm != "threads" && a.comm != "mpi" && a.comm != "nccl")
        usage_error(program, "unknown communicator '" + a.comm + "' in --comm (choose threads, mpi or nccl)");
#if !(defined(COCOD_HAS_NCCL) && defined(__CUDACC__))
      if (a.comm == "nccl") usage_error(program, "--comm nccl: only the CUDA example built with NCCL has it");
#endif
#ifndef COCOD_HAS_MPI
      if (a.comm == "mpi") usage_error(program, "--comm mpi: this build has no MPI (install libboost-mpi-dev and rebuild)");
#endif
    } else if (flag == "--mpi-progress") {
      a.mpi_progress = value(i, flag);
      if (a.mpi_progress != "polling_thread" && a.mpi_progress != "blocking_thread" && a.mpi_progress != "caller")
        usage_error(program, "unknown design '" + a.mpi_progress + "' in --mpi-progress (polling_thread, blocking_thread, caller)");
    } else if (flag == "--mpi-poll-us") {
      a.mpi_poll_us = number(flag, value(i, flag), 0);
    } else if (flag == "--mpi-native") {
      a.mpi_native = true;
    } else if (flag == "--dim") {
      a.dim = static_cast<std::size_t>(integer(flag, value(i, flag), 1));
    } else if (flag == "--samples") {
      a.samples = static_cast<std::size_t>(integer(flag, value(i, flag), 1));
    } else if (flag == "--epochs") {
      a.epochs = number(flag, value(i, flag), 1e-6);
    } else if (flag == "--lr") {
      a.learning_rate = number(flag, value(i, flag), 1e-12);
    } else if (flag == "--momentum") {
      a.momentum = number(flag, value(i, flag), 0);
    } else if (flag == "--batch") {
      a.batch = static_cast<std::size_t>(integer(flag, value(i, flag), 1));
    } else if (flag == "--seed") {
      a.seed = static_cast<std::uint64_t>(integer(flag, value(i, flag), 0));
    } else if (flag == "--csv") {
      a.csv = value(i, flag);
    } else if (flag == "--compute-ratio") {
      a.comm_ratio = number(flag, value(i, flag), 1e-3);
    } else if (flag == "--brief") {
      a.brief = true;
    } else if (flag == "--no-progress") {
      a.progress = false;
    } else {
      usage_error(program, "unknown option '" + flag + "'");
    }
  }
  return a;
}

inline const char* display_name(const std::string& key) {
  if (key == "cocod") return "CoCoD-SGD";
  if (key == "ssgd") return "S-SGD";
  if (key == "local") return "Local-SGD";
  return "Pipe-SGD";
}

/// The round-time model of PAPER.md with C = k*c measured and m the link's all-reduce cost.
inline double predicted_round(const std::string& key, std::size_t k, double C, double m) {
  const double c = C / static_cast<double>(k);
  if (key == "ssgd") return C + static_cast<double>(k) * m;
  if (key == "local") return C + m;
  if (key == "pipe") return static_cast<double>(k) * std::max(c, m);
  return std::max(C, m);
}

/// A model whose worker is `factor` times slower: after each gradient it sleeps factor - 1
/// times the time the gradient took (sleeping uses no CPU, like a slower device would not).
template <class M>
struct Slowed {
  M inner;
  double factor = 1.0;
  decltype(auto) parameters() { return inner.parameters(); }
  [[nodiscard]] std::size_t num_samples() const { return static_cast<std::size_t>(inner.num_samples()); }
  double loss_and_gradient(std::span<const std::size_t> batch, cocod::span_of_t<M> g) {
    const auto t0 = std::chrono::steady_clock::now();
    const double loss = static_cast<double>(inner.loss_and_gradient(batch, g));
    if (factor > 1.0) std::this_thread::sleep_for((factor - 1.0) * (std::chrono::steady_clock::now() - t0));
    return loss;
  }
};

/// rank 0's parameters at one moment of a run, for the curve of metrics against wall time.
template <class M>
struct Snapshot {
  double wall_s = 0, epoch = 0;
  cocod::backend::buffer<cocod::backend_of_model_t<M>, cocod::scalar_of_t<M>> x;
};

/// The example's callback: the progress bar, the CSV log and the snapshots, each when asked for.
template <class M>
struct Observer {
  std::optional<cocod::callbacks::ProgressBar> bar;
  std::optional<cocod::callbacks::CsvLogger> csv;
  M* model = nullptr;  // snapshots of it every `every` epochs (rank 0), when set
  double every = 0.5;
  std::vector<Snapshot<M>> snapshots;
  std::chrono::steady_clock::time_point start{};
  double next = 0;
  std::size_t total_steps = 0;

  void on_begin(const cocod::RunInfo& info) {
    if (bar) bar->on_begin(info);
    if (csv) csv->on_begin(info);
    start = std::chrono::steady_clock::now();
    next = every;
    total_steps = info.total_steps;
    if (info.rank != 0) model = nullptr;
  }
  void on_round(const cocod::RoundStats& r) {
    if (bar) bar->on_round(r);
    if (csv) csv->on_round(r);
    // (the last round's point is the consensus model, added after the run)
    if (!model || r.epoch + 1e-9 < next || r.first_step + r.steps >= total_steps) return;
    while (next <= r.epoch + 1e-9) next += every;
    auto x = cocod::as_span(model->parameters());
    Snapshot<M>& s = snapshots.emplace_back();
    s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    s.epoch = r.epoch;
    s.x.resize(x.size());
    cocod::backend::copy(cocod::backend_of_model_t<M>{}, s.x.span(), x);
  }
  void on_end(const cocod::Report& report) {
    if (bar) bar->on_end(report);
    if (csv) csv->on_end(report);
  }
};

/// One point of the curve: metrics of rank 0's model after `wall_s` seconds of training.
struct Point {
  double wall_s, epoch;
  std::vector<std::pair<std::string, double>> metrics;
};

struct Result {
  std::string key, sampling;  // algorithm and batch sizes ("equal", "proportional")
  cocod::Report report;
  std::vector<std::pair<std::string, double>> metrics;
  std::vector<Point> curve;
  std::shared_ptr<cocod::trace::Timeline> timeline;
  std::vector<std::size_t> last_batch;  // per worker, the last round's M_i (in-process workers)
};

/// Runs a function once per worker: N threads of this process, or this MPI process.
struct ThreadsRunner {
  int workers;
  template <class F>
  void each(F&& f) const {
    cocod::comm::Threads::run(workers, [&](cocod::comm::Threads t) { f(t); });
  }
  [[nodiscard]] bool prints() const { return true; }
  [[nodiscard]] int rank() const { return 0; }
  [[nodiscard]] int size() const { return workers; }
  [[nodiscard]] const char* name() const { return "threads"; }
  [[nodiscard]] double from_rank0(double v) const { return v; }
};

#if defined(COCOD_HAS_NCCL) && defined(__CUDACC__)
/// One worker thread per GPU of this machine, over NCCL.
struct NcclRunner {
  std::vector<int> devices;
  template <class F>
  void each(F&& f) const {
    cocod::comm::Nccl::run(devices, [&](cocod::comm::Nccl c) { f(c); });
  }
  [[nodiscard]] bool prints() const { return true; }
  [[nodiscard]] int rank() const { return 0; }
  [[nodiscard]] int size() const { return static_cast<int>(devices.size()); }
  [[nodiscard]] const char* name() const { return "GPUs over NCCL"; }
  [[nodiscard]] double from_rank0(double v) const { return v; }
};
#endif

#ifdef COCOD_HAS_MPI
struct MpiRunner {
  cocod::comm::Mpi world;
  template <class F>
  void each(F&& f) const {
    f(world);
  }
  [[nodiscard]] bool prints() const { return world.rank() == 0; }
  [[nodiscard]] int rank() const { return world.rank(); }
  [[nodiscard]] int size() const { return world.size(); }
  [[nodiscard]] const char* name() const { return "MPI processes"; }
  /// Every rank gets rank 0's value (so that all ranks pick the same link).
  [[nodiscard]] double from_rank0(double v) const {
    double b[1] = {v};
    auto copy = world;
    copy.broadcast(std::span<double>(b), 0);
    return b[0];
  }
};
#endif

/// Runs one algorithm on every worker, throttled to `link` when `throttle`. make(rank, workers)
/// builds a worker's model; evaluate(model) returns the example's quality metrics (rank 0).
template <class Runner, class MakeModel, class Evaluate>
Result run_one(const Runner& runner, const std::string& key, const std::string& sampling, const Args& args,
               bool throttle, const cocod::comm::Link& link, MakeModel make, Evaluate evaluate) {
  using Inner = std::invoke_result_t<MakeModel, int, int>;
  using Model = Slowed<Inner>;
  Result result{key, sampling, {}, {}, {}, {}, std::vector<std::size_t>(static_cast<std::size_t>(runner.size()), 0)};
  // S-SGD and Pipe-SGD communicate every step: with --period auto each step is their round.
  const bool per_step = key == "ssgd" || key == "pipe";
  const cocod::Options options{.learning_rate = args.learning_rate, .momentum = args.momentum,
                               .period = per_step && args.auto_period ? 1 : args.period,
                               .batch_size = args.batch, .seed = args.seed};
  const Schedule schedule{.lr = LearningRate{args.cosine}, .balance = sampling == "proportional",
                          .auto_period = args.auto_period && !per_step, .max_period = args.max_period};
  if (!args.trace.empty())
    result.timeline = std::make_shared<cocod::trace::Timeline>(
        std::string(display_name(key)) + (args.samplings.size() > 1 ? " (" + sampling + ")" : ""), runner.size());
  auto train = [&](auto comm, int rank) {
    using Comm = decltype(comm);
    const auto r = static_cast<std::size_t>(rank);
    Model model{make(rank, comm.size()), r < args.slowdown.size() ? args.slowdown[r] : 1.0};
    Observer<Model> observer;
    if (args.progress) observer.bar.emplace();
    if (!args.csv.empty()) observer.csv.emplace(args.csv + "." + key + (args.samplings.size() > 1 ? "." + sampling : ""));
    if (!args.curve.empty()) {
      observer.model = &model;
      observer.every = args.curve_every;
    }
    auto go = [&](auto&& opt) {
      if (result.timeline) opt.trace(&result.timeline->lane(rank));
      cocod::Report report = opt.optimize(model, cocod::Epochs{args.epochs}, observer);
      if (!report.rounds.empty()) result.last_batch[r] = report.rounds.back().batch_size;  // own entry
      if (rank != 0) return;
      result.report = std::move(report);
      result.metrics = evaluate(model.inner);
      if (args.curve.empty()) return;
      // the curve: each snapshot evaluated after the run (not on the clock), then the consensus
      auto x = cocod::as_span(model.parameters());
      cocod::backend::buffer<cocod::backend_of_model_t<Model>, cocod::scalar_of_t<Model>> final_x;
      final_x.resize(x.size());
      cocod::backend::copy(cocod::backend_of_model_t<Model>{}, final_x.span(), x);
      for (auto& s : observer.snapshots) {
        cocod::backend::copy(cocod::backend_of_model_t<Model>{}, x, s.x.span());
        result.curve.push_back({s.wall_s, s.epoch, evaluate(model.inner)});
      }
      cocod::backend::copy(cocod::backend_of_model_t<Model>{}, x, final_x.span());
      result.curve.push_back({result.report.seconds, result.report.epochs, result.metrics});
    };
    if (key == "cocod") go(cocod::Optimizer<Model, Comm, Schedule>{comm, options, schedule});
    else if (key == "ssgd") go(cocod::SyncSGD<Model, Comm, Schedule>{comm, options, schedule});
    else if (key == "local") go(cocod::LocalSGD<Model, Comm, Schedule>{comm, options, schedule});
    else go(cocod::PipeSGD<Model, Comm, Schedule>{comm, options, schedule});
  };
  runner.each([&](auto base) {
    const int rank = base.rank();
    if (throttle)
      train(cocod::comm::Throttled<decltype(base)>{base, link}, rank);
    else
      train(base, rank);
  });
  return result;
}

/// Median seconds of one local step (gradient + update) with all workers computing at once,
/// to size the link for `--latency auto`.
template <class Runner, class MakeModel>
double measure_step_seconds(const Runner& runner, const Args& args, MakeModel make) {
  using Model = std::invoke_result_t<MakeModel, int, int>;
  double seconds = 0;
  runner.each([&](auto comm) {
    Model model = make(comm.rank(), comm.size());
    cocod::LocalSGD<Model, cocod::comm::Local> opt{cocod::comm::Local{},
        {.learning_rate = args.learning_rate, .period = 1000, .batch_size = args.batch, .seed = args.seed}};
    const auto report = opt.optimize(model, cocod::Steps{40});
    if (comm.rank() == 0) seconds = report.rounds[0].compute_s / 40.0;
  });
  return runner.from_rank0(seconds);
}

/// The median over the run's rounds of a whole-number field (the period, the batch size).
inline std::size_t median_of(const cocod::Report& rep, std::size_t cocod::RoundStats::*field) {
  std::vector<std::size_t> v;
  for (const auto& r : rep.rounds) v.push_back(r.*field);
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

/// S-SGD's wall time over this row's, as text ("-" when S-SGD did not run with this sampling).
inline std::string speedup_over_ssgd(const std::vector<Result>& results, const Result& r) {
  for (const auto& other : results)
    if (other.key == "ssgd" && other.sampling == r.sampling) {
      char b[32];
      std::snprintf(b, sizeof b, "%.2f", other.report.seconds / r.report.seconds);
      return b;
    }
  return "-";
}

inline std::string row_name(const Result& r, bool with_sampling) {
  std::string name = display_name(r.key);
  if (with_sampling) name += r.sampling == "equal" ? " (eq)" : " (prop)";
  return name;
}

/// The rows: one per algorithm (and sampling), times in ms, medians over rounds of one period.
inline void print_table(const std::vector<Result>& results, const Args& args, bool throttle, double m) {
  const bool with_sampling = args.samplings.size() > 1;
  std::printf("#\n# times are medians over rounds, in ms; model = PAPER.md's round time with kc measured and m %s\n",
              throttle ? "the link cost" : "this row's measured all-reduce time (comm_ms, per step for S-SGD and Pipe-SGD)");
  std::printf("# k and M0 = median period and rank 0's median batch size; waited_s = rank 0's total time blocked on\n"
              "# collectives; speedup = S-SGD's wall time / this row's (S-SGD with the same sampling)\n");
  std::printf("# %-17s %6s %6s %3s %4s %9s %9s %9s %8s %9s %6s %8s %8s %7s", "algorithm", "steps", "epochs", "k", "M0",
              "round_ms", "kc_ms", "comm_ms", "wait_ms", "model_ms", "ratio", "waited_s", "wall_s", "speedup");
  for (const auto& [name, v] : results.front().metrics) std::printf(" %14s", name.c_str());
  std::printf("\n");
  for (const auto& r : results) {
    const auto& rep = r.report;
    const std::size_t k = median_of(rep, &cocod::RoundStats::period);
    // medians over the rounds whose period is the median one
    cocod::Report same_k = rep;
    std::erase_if(same_k.rounds, [&](const cocod::RoundStats& s) { return s.period != k; });
    const double round = same_k.median_round_s(), C = same_k.median_compute_s();
    double comm_cost = m;
    if (!throttle) {  // this row's own all-reduce time: per step for S-SGD and Pipe-SGD
      const bool per_step = r.key == "ssgd" || r.key == "pipe";
      comm_cost = same_k.median_comm_s() / (per_step ? static_cast<double>(k) : 1.0);
    }
    const double model = predicted_round(r.key, k, C, comm_cost);
    const double waited = rep.total(&cocod::RoundStats::wait_s);
    std::printf("  %-17s %6zu %6.2f %3zu %4zu %9.3f %9.3f %9.3f %8.3f %9.3f %6.3f %8.3f %8.3f", row_name(r, with_sampling).c_str(),
                rep.steps, rep.epochs, k, median_of(rep, &cocod::RoundStats::batch_size), round * 1e3, C * 1e3,
                same_k.median_comm_s() * 1e3, same_k.median_wait_s() * 1e3, model * 1e3, round / model, waited, rep.seconds);
    std::printf(" %7s", speedup_over_ssgd(results, r).c_str());
    for (const auto& [name, v] : r.metrics) std::printf(" %14.6g", v);
    std::printf("\n");
  }
}

/// The short table: what a new user asks first (how good, how fast, how much waiting).
inline void print_brief(const std::vector<Result>& results, const Args& args) {
  const bool with_sampling = args.samplings.size() > 1;
  std::printf("#\n# wall_s = training wall time (consensus included); ms/round and ms/step = medians over rounds and\n"
              "# the run's mean per step; waited = share of rank 0's time blocked on collectives;\n"
              "# speedup = S-SGD's wall time / this row's\n");
  std::printf("# %-17s %6s %3s", "algorithm", "epochs", "k");
  for (const auto& [name, v] : results.front().metrics) std::printf(" %14s", name.c_str());
  std::printf(" %8s %9s %8s %7s %8s\n", "wall_s", "ms/round", "ms/step", "waited", "speedup");
  for (const auto& r : results) {
    const auto& rep = r.report;
    const double waited = rep.total(&cocod::RoundStats::wait_s);
    std::printf("  %-17s %6.2f %3zu", row_name(r, with_sampling).c_str(), rep.epochs, median_of(rep, &cocod::RoundStats::period));
    for (const auto& [name, v] : r.metrics) std::printf(" %14.4f", v);
    std::printf(" %8.2f %9.2f %8.2f %6.1f%%", rep.seconds, rep.median_round_s() * 1e3,
                rep.seconds * 1e3 / static_cast<double>(std::max<std::size_t>(1, rep.steps)), 100.0 * waited / rep.seconds);
    std::printf(" %8s\n", speedup_over_ssgd(results, r).c_str());
  }
}

/// The curve file: one row per snapshot of rank 0's model, and the final consensus model.
inline void write_curve(const std::string& path, const std::vector<Result>& results) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot open '" + path + "' for writing");
  out << "algorithm,sampling,epoch,wall_s";
  for (const auto& [name, v] : results.front().metrics) out << ',' << name;
  out << '\n';
  for (const auto& r : results)
    for (const auto& p : r.curve) {
      out << display_name(r.key) << ',' << r.sampling << ',' << p.epoch << ',' << p.wall_s;
      for (const auto& [name, v] : p.metrics) out << ',' << v;
      out << '\n';
    }
  if (!out.flush()) throw std::runtime_error("writing '" + path + "' failed");
}

template <class Runner, class MakeModel, class Evaluate>
int compare_on(const Runner& runner, const Args& args, std::size_t parameters, MakeModel make, Evaluate evaluate) {
  const int workers = runner.size();
  if (args.slowdown.size() > static_cast<std::size_t>(workers)) {
    if (runner.prints())
      std::fprintf(stderr, "--slowdown: worker %zu does not exist (%d workers, ranks 0..%d)\n", args.slowdown.size() - 1,
                   workers, workers - 1);
    return 2;
  }
  using Model = std::invoke_result_t<MakeModel, int, int>;
  // + the control slots: 2, and 2 per worker for the adaptive schedule's measurements
  const std::size_t bytes = (parameters + 2 + 2 * static_cast<std::size_t>(workers)) * sizeof(cocod::scalar_of_t<Model>);
  const bool throttle = args.comm == "threads" || args.link_given;  // mpi, nccl: the real network
  cocod::comm::Link link = cocod::comm::Link::gbit(args.bandwidth_gbit, args.latency_us.value_or(0.0));
  const double step_s = measure_step_seconds(runner, args, make);
  if (!args.latency_us) {
    // one all-reduce ~ k local steps: solve 2(N-1) alpha + 2(N-1)/N S/beta = k c for alpha
    const double target = static_cast<double>(args.period) * step_s / args.comm_ratio;
    const double bandwidth_part = link.all_reduce_seconds(bytes, workers);
    link.latency = workers > 1 ? std::max(0.0, (target - bandwidth_part) / (2.0 * (workers - 1))) : 0.0;
  }
  const double m = link.all_reduce_seconds(bytes, workers);
  if (runner.prints()) {
    std::string k = args.auto_period ? "auto (<= " + std::to_string(args.max_period) + ")" : std::to_string(args.period);
    std::printf("# %d workers (%s), k = %s, %zu parameters (%zu bytes per all-reduce), batch %zu per worker, sampling %s\n",
                workers, runner.name(), k.c_str(), parameters, bytes, args.batch, join(args.samplings).c_str());
    for (std::size_t r = 0; r < args.slowdown.size(); ++r)
      if (args.slowdown[r] != 1.0) std::printf("# worker %zu is %g times slower\n", r, args.slowdown[r]);
    if (throttle)
      std::printf("# link: %g Gbit/s, latency %.1f us%s -> one all-reduce m = %.3f ms; one local step c = %.3f ms\n",
                  args.bandwidth_gbit, link.latency * 1e6, args.latency_us ? "" : " (auto: m ~ k*c / compute-ratio)", m * 1e3,
                  step_s * 1e3);
    else
      std::printf("# link: the MPI job's own network (progress: %s%s); one local step c = %.3f ms\n",
                  args.mpi_progress.c_str(), args.mpi_native ? ", native all-reduce" : "", step_s * 1e3);
    std::fflush(stdout);  // before the progress bars on stderr
  }
  std::vector<Result> results;
  for (const auto& sampling : args.samplings)
    for (const auto& key : args.algorithms)
      results.push_back(run_one(runner, key, sampling, args, throttle, link, make, evaluate));
  if (!args.trace.empty()) {
    std::vector<const cocod::trace::Timeline*> timelines;
    for (const auto& r : results) timelines.push_back(r.timeline.get());
    // in-process workers share one file; each MPI process writes its own lane's file
    std::string path = args.trace;
    if (args.comm == "mpi") path += ".rank" + std::to_string(runner.rank());
    cocod::trace::save_chrome_trace(path, timelines);
    if (runner.prints()) std::printf("# trace: %s (open in chrome://tracing or https://ui.perfetto.dev)\n", path.c_str());
  }
  if (!runner.prints()) return 0;
  if (!args.curve.empty()) {
    write_curve(args.curve, results);
    std::printf("# curve: %s\n", args.curve.c_str());
  }
  if (args.brief)
    print_brief(results, args);
  else
    print_table(results, args, throttle, m);
  if (args.comm == "threads" && std::find(args.samplings.begin(), args.samplings.end(), "proportional") != args.samplings.end()) {
    std::printf("# batch sizes of the last round, worker 0..%d:\n", workers - 1);
    for (const auto& r : results) {
      std::printf("#   %-17s", row_name(r, args.samplings.size() > 1).c_str());
      for (std::size_t b : r.last_batch) std::printf(" %4zu", b);
      std::printf("\n");
    }
  }
  return 0;
}

/// The whole example: pick the communicator and the link, run each algorithm, print one row per
/// algorithm (rank 0 under MPI).
template <class MakeModel, class Evaluate>
int compare(int& argc, char**& argv, const Args& args, std::size_t parameters, MakeModel make, Evaluate evaluate) {
  if (args.comm == "mpi") {
#ifdef COCOD_HAS_MPI
    cocod::comm::MpiOptions o;
    o.progress = args.mpi_progress == "caller"            ? cocod::comm::MpiProgress::caller
                 : args.mpi_progress == "blocking_thread" ? cocod::comm::MpiProgress::blocking_thread
                                                          : cocod::comm::MpiProgress::polling_thread;
    o.deterministic = !args.mpi_native;
    o.poll_interval = std::chrono::microseconds(static_cast<long>(args.mpi_poll_us));
    o.poll_min = std::min(o.poll_min, o.poll_interval);
    return cocod::comm::Mpi::run(argc, argv, [&](cocod::comm::Mpi world) {
      compare_on(MpiRunner{world}, args, parameters, make, evaluate);
    }, o);
#endif
  }
#if defined(COCOD_HAS_NCCL) && defined(__CUDACC__)
  if (args.comm == "nccl") {
    int n = 0;
    cudaGetDeviceCount(&n);
    std::vector<int> devices(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) devices[static_cast<std::size_t>(i)] = i;
    return compare_on(NcclRunner{devices}, args, parameters, make, evaluate);
  }
#endif
  return compare_on(ThreadsRunner{args.workers}, args, parameters, make, evaluate);
}

}  // namespace example
