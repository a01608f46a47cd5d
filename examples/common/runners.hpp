#pragma once
// Where the examples' workers run (threads of this process, MPI processes, GPUs over NCCL) and
// the link they share: one local step's time measured, the throttled link sized from it. Example
// code, not part of the library.
#include <cocod.hpp>
#ifdef COCOD_HAS_MPI
#include <cocod/comm/mpi.hpp>
#endif
#if defined(COCOD_HAS_GLOO) && !defined(__CUDACC__)
#include <cocod/comm/gloo.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "options.hpp"

namespace example {

/// Runs a function once per worker: N threads of this process.
struct ThreadsRunner {
  int workers;
  static constexpr bool throttled = true;  // threads have no network: they always share the emulated link
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

/// --group-size: groups of `members` threads, each group one worker of the algorithm. A rank gets
/// both of its communicators: `inner` joins its group (the fast link), `outer` joins the rank of
/// the same place in every other group (the throttled link).
struct GroupsRunner {
  int groups, members;
  static constexpr bool throttled = true;  // (the link between groups)
  struct Member {
    cocod::comm::Threads inner, outer;
  };
  template <class F>
  void each(F&& f) const {
    cocod::comm::Threads::run_groups(groups, members,
                                     [&](cocod::comm::Threads inner, cocod::comm::Threads outer) { f(Member{inner, outer}); });
  }
  /// The same ranks without groups (to time one rank's local step).
  [[nodiscard]] ThreadsRunner flat() const { return {groups * members}; }
  [[nodiscard]] bool prints() const { return true; }
  [[nodiscard]] int rank() const { return 0; }
  [[nodiscard]] int size() const { return groups; }
  [[nodiscard]] std::string name() const {
    return "groups of " + std::to_string(members) + " threads, " + std::to_string(groups * members) + " ranks";
  }
  [[nodiscard]] double from_rank0(double v) const { return v; }
};

#if defined(COCOD_HAS_NCCL) && defined(__CUDACC__)
/// One worker thread per GPU of this machine, over NCCL.
struct NcclRunner {
  std::vector<int> devices;
  static constexpr bool throttled = false;  // the GPUs' own links, unless --bandwidth or --latency is given
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

/// This process's worker, one of the processes of a job (comm::Mpi, comm::Gloo).
template <class Comm>
struct ProcessRunner {
  Comm world;
  const char* what;  // "MPI processes"
  static constexpr bool throttled = false;  // the real network, unless --bandwidth or --latency is given
  template <class F>
  void each(F&& f) const {
    f(world);
  }
  [[nodiscard]] bool prints() const { return world.rank() == 0; }
  [[nodiscard]] int rank() const { return world.rank(); }
  [[nodiscard]] int size() const { return world.size(); }
  [[nodiscard]] const char* name() const { return what; }
  /// Every rank gets rank 0's value (so that all ranks pick the same link).
  [[nodiscard]] double from_rank0(double v) const {
    double b[1] = {v};
    auto copy = world;
    copy.broadcast(std::span<double>(b), 0);
    return b[0];
  }
};

#ifdef COCOD_HAS_MPI
/// comm::Mpi's settings from --mpi-progress, --mpi-native, --mpi-poll-us and --mpi-stall-timeout.
inline cocod::comm::MpiOptions mpi_options(const Args& args) {
  cocod::comm::MpiOptions o;
  o.progress = args.mpi_progress == "caller"            ? cocod::comm::MpiProgress::caller
               : args.mpi_progress == "blocking_thread" ? cocod::comm::MpiProgress::blocking_thread
                                                        : cocod::comm::MpiProgress::polling_thread;
  o.deterministic = !args.mpi_native;
  o.poll_interval = std::chrono::microseconds(static_cast<long>(args.mpi_poll_us));
  o.poll_min = std::min(o.poll_min, o.poll_interval);
  o.stall_timeout = std::chrono::milliseconds(static_cast<long long>(args.mpi_stall_timeout_s * 1000.0));
  o.stall_suspected = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  return o;
}
#endif

#if defined(COCOD_HAS_GLOO) && !defined(__CUDACC__)
/// --connect-timeout.
inline std::chrono::milliseconds connect_timeout(const Args& args) {
  return std::chrono::milliseconds(static_cast<long long>(args.connect_timeout_s * 1000.0));
}

/// comm::Gloo's settings from --store, --rank, --workers, --serve-store, --token-file (or COCOD_TOKEN), --hostname
/// and --connect-timeout.
inline cocod::comm::GlooOptions gloo_options(const Args& args) {
  return {.store = args.store, .rank = args.rank, .size = args.workers, .serve_store = args.serve_store,
          .token = args.token, .hostname = args.hostname, .connect_timeout = connect_timeout(args)};
}

/// While it lives, a connection is being made: if that takes longer than a few seconds, one line
/// on stderr says to what and how long it may still take (an unreachable store is not silent).
class SlowNotice {
 public:
  SlowNotice(const Args& args, std::string what)
      : thread_([this, program = args.program, what = std::move(what), limit = args.connect_timeout_s] {
          std::unique_lock lock(mutex_);
          if (done_.wait_for(lock, std::chrono::seconds(3), [&] { return finished_; })) return;
          std::fprintf(stderr, "%s: still connecting to %s (giving up %g s after the start; --connect-timeout S)\n",
                       program.c_str(), what.c_str(), limit);
        }) {}
  SlowNotice(const SlowNotice&) = delete;
  SlowNotice& operator=(const SlowNotice&) = delete;
  ~SlowNotice() {
    {
      std::lock_guard lock(mutex_);
      finished_ = true;
    }
    done_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  std::thread thread_;
};
#endif

/// Median seconds of one local step (gradient + the local update `update`) with all workers
/// computing at once, to size the link for `--latency auto`.
template <class Runner, class MakeModel, class Update>
double measure_step_seconds(const Runner& runner, const Args& args, MakeModel make, const Update& update) {
  if constexpr (requires { runner.flat(); }) {
    return measure_step_seconds(runner.flat(), args, make, update);
  } else {
    using Model = std::invoke_result_t<MakeModel, int, int>;
    double seconds = 0;
    runner.each([&](auto comm) {
      Model model = make(comm.rank(), comm.size());
      cocod::LocalSGD<Model, cocod::comm::Local, cocod::schedule::Fixed<>, Update> opt{cocod::comm::Local{},
          {.learning_rate = args.learning_rate, .period = 1000, .batch_size = args.batch, .seed = args.seed}, update};
      const auto report = opt.optimize(model, cocod::Steps{40});
      if (comm.rank() == 0) seconds = report.rounds[0].compute_s / 40.0;
    });
    return runner.from_rank0(seconds);
  }
}

/// The throttled link of --bandwidth and --latency; with --latency auto, the latency that makes
/// one all-reduce of `bytes` cost about k local steps of `step_s` / --compute-ratio.
inline cocod::comm::Link size_link(const Args& args, std::size_t bytes, int workers, double step_s) {
  cocod::comm::Link link = cocod::comm::Link::gbit(args.bandwidth_gbit, args.latency_us.value_or(0.0));
  if (!args.latency_us) {
    // one all-reduce ~ k local steps: solve 2(N-1) alpha + 2(N-1)/N S/beta = k c for alpha
    const double target = static_cast<double>(args.period) * step_s / args.comm_ratio;
    const double bandwidth_part = link.all_reduce_seconds(bytes, workers);
    link.latency = workers > 1 ? std::max(0.0, (target - bandwidth_part) / (2.0 * (workers - 1))) : 0.0;
  }
  return link;
}

}  // namespace example
