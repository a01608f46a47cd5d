#pragma once
// Shared by the examples: each algorithm run on in-process workers over a throttled link (or MPI
// processes, or GPUs over NCCL), then the table, the curve and the trace. The pieces:
// options.hpp (the command line), runners.hpp (workers and link), run.hpp (one algorithm's run),
// table.hpp (the tables), curve.hpp (the curve and trace files). Example code, not part of the
// library.
#include <cocod.hpp>

#include <algorithm>
#include <concepts>
#include <cstdio>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "curve.hpp"
#include "options.hpp"
#include "run.hpp"
#include "runners.hpp"
#if defined(COCOD_HAS_GLOO) && !defined(__CUDACC__)
#include "elastic.hpp"
#endif
#include "table.hpp"

namespace example {

/// The lines above the table: workers, period, model size, slowed workers, the link.
template <class Runner>
void print_setup(const Runner& runner, const Args& args, std::size_t parameters, std::size_t bytes, bool throttle,
                 const cocod::comm::Link& link, double step_s) {
  const double m = link.all_reduce_seconds(bytes, runner.size());
  std::string k = args.auto_period ? "auto (<= " + std::to_string(args.max_period) : std::to_string(args.period);
  if (args.auto_period) {  // the keys whose exchange may take only a share of the round
    for (const auto& key : args.algorithms)
      if (const double share = depth_share_for(key, args); share != 1.0 && !per_step(key))
        k += "; " + display_name(key) + ": depth share " + cli::number_text(share);
    k += ")";
  }
  std::printf("# %d workers (%s), k = %s, %zu parameters (%zu bytes per all-reduce), batch %zu per worker, sampling %s\n",
              runner.size(), std::string(runner.name()).c_str(), k.c_str(), parameters, bytes, args.batch, cli::join(args.samplings).c_str());
  if constexpr (requires { runner.members; })
    std::printf("# each worker a group of %d ranks: gradients averaged every step inside it; each rank exchanges its "
                "slice, 1/%d of the model (the bytes above), over the link between groups\n",
                runner.members, runner.members);
  for (std::size_t r = 0; r < args.slowdown.size(); ++r)
    if (args.slowdown[r] != 1.0) std::printf("# worker %zu is %g times slower\n", r, args.slowdown[r]);
  if (throttle)
    std::printf("# link: %g Gbit/s, latency %.1f us%s -> one all-reduce m = %.3f ms; one local step c = %.3f ms\n",
                args.bandwidth_gbit, link.latency * 1e6, args.latency_us ? "" : " (auto: m ~ k*c / compute-ratio)", m * 1e3,
                step_s * 1e3);
  else if (args.comm == "gloo")
    std::printf("# link: the network between the processes (Gloo over TCP, store %s); one local step c = %.3f ms\n",
                args.store.c_str(), step_s * 1e3);
  else
    std::printf("# link: the MPI job's own network (progress: %s%s); one local step c = %.3f ms\n",
                args.mpi_progress.c_str(), args.mpi_native ? ", native all-reduce" : "", step_s * 1e3);
  std::fflush(stdout);  // before the progress bars on stderr
}

/// What rank 0 prints and writes after the runs: the curve, the table, the last batch sizes.
inline void report(const std::vector<Result>& results, const Args& args, bool throttle, const cocod::comm::Link& link,
                   int workers) {
  if (!args.curve.empty()) {
    write_curve(args.curve, results);
    std::printf("# curve: %s\n", args.curve.c_str());
  }
  if (args.brief)
    print_brief(results, args);
  else
    print_table(results, args, throttle, link, workers);
  if (args.comm == "threads" && std::find(args.samplings.begin(), args.samplings.end(), "proportional") != args.samplings.end())
    print_last_batches(results, args, workers);
  for (const auto& r : results) {  // one line per run, to compare runs bit for bit from the shell
    const std::string run = display_name(r.key) + (args.samplings.size() > 1 ? " (" + r.sampling + ")" : std::string());
    if (!r.resumed.empty()) std::printf("# %s resumed from %s\n", run.c_str(), r.resumed.c_str());
    std::printf("model digest %s: %s\n", run.c_str(), r.digest.c_str());
  }
}

/// Every algorithm (and sampling) on `runner`'s workers, each with the local update `update`;
/// rank 0 prints. Returns the exit status.
template <class Runner, class MakeModel, class Evaluate, class Update>
int compare_on(const Runner& runner, const Args& args, std::size_t parameters, MakeModel make, Evaluate evaluate,
               const Update& update) {
  const int workers = runner.size();
  if (args.slowdown.size() > static_cast<std::size_t>(workers)) {  // (the processes' count is known only now)
    if (runner.prints()) cli::print_refusal(args.program, slowdown_beyond(args.slowdown.size() - 1, workers));
    return 2;
  }
  using Model = std::invoke_result_t<MakeModel, int, int>;
  // + the control slots: 3, and per worker 1 (its step), 2 for the non-finite guard (+ 1 in
  // all) and 2 for the adaptive schedule's measurements
  std::size_t bytes = (parameters + 4 + 5 * static_cast<std::size_t>(workers)) * sizeof(cocod::scalar_of_t<Model>);
  if constexpr (requires { runner.members; }) bytes /= static_cast<std::size_t>(runner.members);  // a rank's slice
  const bool throttle = Runner::throttled || args.link_given;  // mpi, gloo, nccl: the real network
  const double step_s = measure_step_seconds(runner, args, make, update);
  const cocod::comm::Link link = size_link(args, bytes, workers, step_s);
  if (runner.prints()) print_setup(runner, args, parameters, bytes, throttle, link, step_s);
  std::vector<Result> results;
  for (const auto& sampling : args.samplings)
    for (const auto& key : args.algorithms)
      results.push_back(run_one(runner, key, sampling, args, throttle, link, make, evaluate, update));
  if (!args.trace.empty()) {
    const std::string path = write_trace(args.trace, results, args.comm == "mpi" || args.comm == "gloo", runner.rank());
    if (runner.prints()) std::printf("# trace: %s (open in chrome://tracing or https://ui.perfetto.dev)\n", path.c_str());
  }
  if (runner.prints()) report(results, args, throttle, link, workers);
  return 0;
}

/// The whole example: pick the communicator and the link, run each algorithm, print one row per
/// algorithm (rank 0 under MPI). `update`: the local update rule (update::Sgd, whose momentum
/// --momentum sets; or another rule with its settings).
template <class MakeModel, class Evaluate, class Update = cocod::update::Sgd>
int compare(int& argc, char**& argv, const Args& args, std::size_t parameters, MakeModel make, Evaluate evaluate,
            const Update& update = {}) {
#ifdef COCOD_HAS_MPI
  if (args.comm == "mpi") {
    int status = 0;
    const int mpi_status = cocod::comm::Mpi::run(argc, argv, [&](cocod::comm::Mpi world) {
      status = compare_on(ProcessRunner<cocod::comm::Mpi>{world, "MPI processes"}, args, parameters, make, evaluate, update);
    }, mpi_options(args));
    return mpi_status != 0 ? mpi_status : status;
  }
#else
  (void)argc, (void)argv;
#endif
#if defined(COCOD_HAS_GLOO) && !defined(__CUDACC__)
  if (args.comm == "gloo") {
    int status = 0;
    std::optional<SlowNotice> notice(std::in_place, args,
                                     "the store at " + args.store + " and the other " + std::to_string(args.workers - 1) + " workers");
    const int gloo_status = cocod::comm::Gloo::run(gloo_options(args), [&](cocod::comm::Gloo world) {
      notice.reset();
      status = compare_on(ProcessRunner<cocod::comm::Gloo>{world, "processes over Gloo (TCP)"}, args, parameters, make, evaluate, update);
    });
    return gloo_status != 0 ? gloo_status : status;
  }
  if (args.comm == "elastic") {
    try {
      return elastic_main(args, make, evaluate, update);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", argc > 0 ? argv[0] : "example", e.what());
      return 1;
    }
  }
#endif
#if defined(COCOD_HAS_NCCL) && defined(__CUDACC__)
  if (args.comm == "nccl") {
    int n = 0;
    cudaGetDeviceCount(&n);
    std::vector<int> devices(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) devices[static_cast<std::size_t>(i)] = i;
    return compare_on(NcclRunner{devices}, args, parameters, make, evaluate, update);
  }
#endif
  try {
    if (args.group_size > 1) {
      using Model = std::invoke_result_t<MakeModel, int, int>;
      if constexpr (std::same_as<cocod::span_of_t<Model>, std::span<cocod::scalar_of_t<Model>>>) {
        return compare_on(GroupsRunner{args.workers / args.group_size, args.group_size}, args, parameters, make, evaluate,
                          update);
      } else {  // cocod::GroupModel averages host memory
        std::fprintf(stderr, "%s: --group-size: groups take models in host memory; this example's is on the GPU\n",
                     argc > 0 ? argv[0] : "example");
        return 2;
      }
    }
    return compare_on(ThreadsRunner{args.workers}, args, parameters, make, evaluate, update);
  } catch (const std::exception& e) {  // a worker's failure, rethrown by Threads::run
    std::fprintf(stderr, "%s: %s\n", argc > 0 ? argv[0] : "example", e.what());
    return 1;
  }
}

}  // namespace example
