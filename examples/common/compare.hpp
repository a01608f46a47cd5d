#pragma once
// Shared by the convex examples: the command line, the run of each algorithm on in-process
// workers over a throttled link, and the summary table. Example code, not part of the library.
#include <cocod.hpp>
#ifdef COCOD_HAS_MPI
#include <cocod/comm/mpi.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace example {

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
          "  --period K         local steps per round (default: %zu)\n"
          "  --bandwidth GBIT   throttle collectives to a link of this bandwidth in Gbit/s (default: %g;\n"
          "                     with --comm mpi the real network is used unless --bandwidth or\n"
          "                     --latency is given)\n"
          "  --latency US|auto  link latency in microseconds; 'auto' picks it so that one all-reduce\n"
          "                     costs about K local steps (default: %s)\n"
          "  --mpi-progress P   polling_thread, blocking_thread or caller (default: polling_thread)\n"
          "  --mpi-poll-us US   the polling thread's longest sleep between MPI_Test calls (default: 500)\n"
          "  --mpi-native       MPI's own all-reduce (not bitwise equal to --comm threads)\n"
          "  --dim D, --samples S   model dimension and samples per worker (example defaults)\n"
          "  --epochs E         passes over the data (default: %g)\n"
          "  --lr RATE          learning rate (default: %g)\n"
          "  --momentum MU      local momentum (default: %g)\n"
          "  --batch M          mini-batch size per worker (default: %zu)\n"
          "  --seed S           seed of data and sampling (default: %llu)\n"
          "  --csv FILE         also write the per-round log of every algorithm to FILE\n"
          "  --no-progress      no progress bars\n",
          what, program.c_str(), a.workers, a.period, a.bandwidth_gbit,
          latency_text(a.latency_us).c_str(), a.epochs, a.learning_rate,
          a.momentum, a.batch, static_cast<unsigned long long>(a.seed));
      std::exit(0);
    } else if (flag == "--algo") {
      const std::string list = value(i, flag);
      a.algorithms.clear();
      std::stringstream ss(list);
      for (std::string item; std::getline(ss, item, ',');) {
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
      a.period = static_cast<std::size_t>(integer(flag, value(i, flag), 1));
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

struct Result {
  cocod::Report report;
  std::vector<std::pair<std::string, double>> metrics;
};

/// Runs a function once per worker: N threads of this process, or this MPI process.
struct ThreadsRunner {
  int workers;
  template <class F>
  void each(F&& f) const {
    cocod::comm::Threads::run(workers, [&](cocod::comm::Threads t) { f(t); });
  }
  [[nodiscard]] bool prints() const { return true; }
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
Result run_one(const Runner& runner, const std::string& key, const Args& args, bool throttle,
               const cocod::comm::Link& link, MakeModel make, Evaluate evaluate) {
  using Model = std::invoke_result_t<MakeModel, int, int>;
  Result result;
  const cocod::Options options{.learning_rate = args.learning_rate, .momentum = args.momentum,
                               .period = args.period, .batch_size = args.batch, .seed = args.seed};
  auto train = [&](auto comm, int rank) {
    using Comm = decltype(comm);
    Model model = make(rank, comm.size());
    auto go = [&](auto&& opt) {
      cocod::Report report;
      std::string csv = args.csv;
      if (!csv.empty()) csv += "." + key;
      if (args.progress && !csv.empty())
        report = opt.optimize(model, cocod::Epochs{args.epochs}, cocod::callbacks::ProgressBar{}, cocod::callbacks::CsvLogger{csv});
      else if (args.progress)
        report = opt.optimize(model, cocod::Epochs{args.epochs}, cocod::callbacks::ProgressBar{});
      else if (!csv.empty())
        report = opt.optimize(model, cocod::Epochs{args.epochs}, cocod::callbacks::CsvLogger{csv});
      else
        report = opt.optimize(model, cocod::Epochs{args.epochs});
      if (rank == 0) {
        result.report = std::move(report);
        result.metrics = evaluate(model);
      }
    };
    if (key == "cocod") go(cocod::Optimizer<Model, Comm>{comm, options});
    else if (key == "ssgd") go(cocod::SyncSGD<Model, Comm>{comm, options});
    else if (key == "local") go(cocod::LocalSGD<Model, Comm>{comm, options});
    else go(cocod::PipeSGD<Model, Comm>{comm, options});
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

template <class Runner, class MakeModel, class Evaluate>
int compare_on(const Runner& runner, const Args& args, std::size_t parameters, MakeModel make, Evaluate evaluate) {
  const int workers = runner.size();
  using Model = std::invoke_result_t<MakeModel, int, int>;
  const std::size_t bytes = (parameters + 2) * sizeof(cocod::scalar_of_t<Model>);  // + control slots
  const bool throttle = args.comm == "threads" || args.link_given;  // mpi, nccl: the real network
  cocod::comm::Link link = cocod::comm::Link::gbit(args.bandwidth_gbit, args.latency_us.value_or(0.0));
  const double step_s = measure_step_seconds(runner, args, make);
  if (!args.latency_us) {
    // one all-reduce ~ k local steps: solve 2(N-1) alpha + 2(N-1)/N S/beta = k c for alpha
    const double target = static_cast<double>(args.period) * step_s;
    const double bandwidth_part = link.all_reduce_seconds(bytes, workers);
    link.latency = workers > 1 ? std::max(0.0, (target - bandwidth_part) / (2.0 * (workers - 1))) : 0.0;
  }
  const double m = link.all_reduce_seconds(bytes, workers);
  if (runner.prints()) {
    std::printf("# %d workers (%s), k = %zu, %zu parameters (%zu bytes per all-reduce)\n", workers, runner.name(),
                args.period, parameters, bytes);
    if (throttle)
      std::printf("# link: %g Gbit/s, latency %.1f us%s -> one all-reduce m = %.3f ms; one local step c = %.3f ms (k*c = %.3f ms)\n",
                  args.bandwidth_gbit, link.latency * 1e6, args.latency_us ? "" : " (auto: m ~ k*c)", m * 1e3,
                  step_s * 1e3, step_s * 1e3 * static_cast<double>(args.period));
    else
      std::printf("# link: the MPI job's own network (progress: %s%s); one local step c = %.3f ms (k*c = %.3f ms)\n",
                  args.mpi_progress.c_str(), args.mpi_native ? ", native all-reduce" : "", step_s * 1e3,
                  step_s * 1e3 * static_cast<double>(args.period));
    std::fflush(stdout);  // before the progress bars on stderr
  }
  std::vector<std::pair<std::string, Result>> results;
  for (const auto& key : args.algorithms) results.emplace_back(key, run_one(runner, key, args, throttle, link, make, evaluate));
  if (!runner.prints()) return 0;
  std::printf("#\n# times are medians over rounds, in ms; model = PAPER.md's round time with kc measured and m %s\n",
              throttle ? "the link cost" : "this row's measured all-reduce time (comm_ms, per step for S-SGD and Pipe-SGD)");
  std::printf("# speedup = S-SGD's wall time / this algorithm's (when S-SGD ran)\n");
  std::printf("# %-10s %6s %7s %10s %9s %9s %9s %9s %7s %8s %8s", "algorithm", "steps", "epochs", "round_ms", "kc_ms",
              "comm_ms", "wait_ms", "model_ms", "ratio", "wall_s", "speedup");
  for (const auto& [name, v] : results.front().second.metrics) std::printf(" %14s", name.c_str());
  std::printf("\n");
  double ssgd_wall = std::nan("");
  for (const auto& [key, r] : results)
    if (key == "ssgd") ssgd_wall = r.report.seconds;
  for (const auto& [key, r] : results) {
    const auto& rep = r.report;
    const double round = rep.median_round_s(), C = rep.median_compute_s();
    double comm_cost = m;
    if (!throttle) {  // this row's own all-reduce time: per step for S-SGD and Pipe-SGD
      const bool per_step = key == "ssgd" || key == "pipe";
      comm_cost = rep.median_comm_s() / (per_step ? static_cast<double>(args.period) : 1.0);
    }
    const double model = predicted_round(key, args.period, C, comm_cost);
    std::printf("  %-10s %6zu %7.2f %10.3f %9.3f %9.3f %9.3f %9.3f %7.3f %8.3f", display_name(key), rep.steps,
                rep.epochs, round * 1e3, C * 1e3, rep.median_comm_s() * 1e3, rep.median_wait_s() * 1e3,
                model * 1e3, round / model, rep.seconds);
    if (std::isnan(ssgd_wall))
      std::printf(" %8s", "-");
    else
      std::printf(" %8.2f", ssgd_wall / rep.seconds);
    for (const auto& [name, v] : r.metrics) std::printf(" %14.6g", v);
    std::printf("\n");
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
