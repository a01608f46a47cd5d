#pragma once
// --comm elastic: this process is one worker of an elastic run (cocod::elastic::train) that a
// coordinator (the cocod-coordinator program) keeps: it trains the one --algo in membership
// epochs, goes on without a lost worker from the latest round every survivor holds, and admits
// new workers at agreed round ends. The rank 0 of each epoch prints a line per membership
// change and the curve's points (its own model's metrics every --curve-every epochs, with the
// number of workers), and the last epoch's rank 0 the final metrics and the membership log;
// every worker that finishes prints its model's digest.
// Example code, not part of the library.
#include <cocod.hpp>
#include <cocod/elastic/train.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "options.hpp"
#include "run.hpp"
#include "runners.hpp"

namespace example {

/// The worker's whole run; returns the exit status.
template <class MakeModel, class Evaluate, class Update>
int elastic_main(const Args& args, MakeModel make, Evaluate evaluate, const Update& update) {
  using Model = std::invoke_result_t<MakeModel, int, int>;
  const std::string key = args.algorithms.front();
  const Settings<Update> settings = settings_for(key, args, update);
  const Schedule schedule = schedule_for(key, "equal", args);
  std::optional<cocod::elastic::Member> joined;
  {
    const SlowNotice notice(args, "the coordinator at " + args.coordinator);
    joined.emplace(cocod::elastic::MemberOptions{.coordinator = args.coordinator, .connect_timeout = connect_timeout(args),
                                                 .min_workers = args.min_workers, .token = args.token});
  }
  cocod::elastic::Member& member = *joined;
  cocod::elastic::TrainOptions o;
  o.hostname = args.hostname;
  o.stall_timeout = std::chrono::milliseconds(static_cast<long long>(args.mpi_stall_timeout_s * 1000.0));
  o.snapshot_every = args.snapshot_every;
  if (args.elastic_leave_after) o.leave_after_round = args.elastic_leave_after;
  o.script.insert(args.elastic_script.begin(), args.elastic_script.end());
  if (!args.checkpoint.empty()) {  // files too: the fallback when the coordinator is lost
    o.checkpoints.emplace(checkpoint_folder(args, key, "equal"));
    o.checkpoint_every = args.checkpoint_every;
    o.resume = args.resume;
  }
  std::ofstream curve;
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  double next_point = args.curve_every;
  std::int64_t shown_epoch = 0;
  bool trained = false;
  const auto unix_s = [] { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); };
  // every worker: a line at its first round end; rank 0 of each epoch: a line when the
  // membership changed, and the curve's points
  const auto on_round = [&](const cocod::RoundStats& r, const cocod::elastic::Epoch& e, Model& model) {
    if (!std::exchange(trained, true)) {
      std::printf("# %.3f s: this worker's first round end in the run: round %zu, membership epoch %lld (unix time %.3f)\n",
                  seconds(), r.round + 1, static_cast<long long>(e.number), unix_s());
      std::fflush(stdout);
    }
    if (e.rank != 0) return;
    if (e.number != shown_epoch) {
      shown_epoch = e.number;
      std::printf("# %.3f s: membership epoch %lld: %d workers, round %zu completed (unix time %.3f)\n", seconds(),
                  static_cast<long long>(e.number), e.size(), r.round + 1, unix_s());
      std::fflush(stdout);
    }
    if (args.curve.empty() || r.epoch + 1e-9 < next_point) return;
    while (next_point <= r.epoch + 1e-9) next_point += args.curve_every;
    if (!curve.is_open()) curve.open(args.curve), curve << "wall_s,epoch,workers,membership_epoch,metric,value\n";
    for (const auto& [name, value] : evaluate(model))
      curve << seconds() << "," << r.epoch << "," << e.size() << "," << e.number << "," << name << "," << value << "\n";
    curve.flush();
  };
  with_algorithm<Model, cocod::comm::Gloo, Update>(key, settings, schedule, [&]<class Trainer>(const auto&... parts) {
    auto result = cocod::elastic::train<Trainer>(member, o, cocod::Epochs{args.epochs}, make,
                                                 [&](cocod::comm::Gloo c) { return Trainer(c, parts...); },
                                                 on_round);
    if (!result.report) {
      std::printf("# this worker left the run (%lld membership epochs)\n", static_cast<long long>(result.epochs));
      return;
    }
    Model& model = *result.model;
    const std::string digest = cocod::model_digest(model);
    for (const std::string& why : result.losses) std::printf("# an epoch of this worker ended: %s\n", why.c_str());
    if (result.steps_redone > 0) std::printf("# steps this worker took again after losses: %zu\n", result.steps_redone);
    for (const cocod::elastic::EpochStart& t : result.starts)  // where the time of each membership change went
      std::printf("# membership epoch %lld began %.3f s after the wait for it (unix time %.3f): formed %.3f s, round agreed "
                  "%.3f s, connected %.3f s, model made %.3f s, continued %.3f s, first round %.3f s\n",
                  static_cast<long long>(t.epoch), t.total(), t.since_unix, t.formed, t.agreed, t.connected, t.made,
                  t.continued, t.first_round);
    if (result.report->info.rank != 0) {  // every worker's final model, to compare
      std::printf("model digest %s: %s\n", display_name(key).c_str(), digest.c_str());
      return;
    }
    const cocod::Report& last = *result.report;  // (of the last membership epoch)
    std::printf("# %.3f s: %s finished: %zu steps, %lld membership epochs seen by this worker; the last epoch: "
                "%zu rounds, wall_s %.3f, ms/round %.3f (median)\n",
                seconds(), display_name(key).c_str(), last.info.total_steps, static_cast<long long>(result.epochs),
                last.rounds.size() + last.rounds_dropped, last.seconds, last.median_round_s() * 1e3);
    for (const auto& [name, value] : evaluate(model)) {
      std::printf("%s %.6f\n", name.c_str(), value);
      if (!args.curve.empty())
        curve << seconds() << "," << result.report->epochs << "," << result.report->info.workers << ",final," << name << ","
              << value << "\n";
    }
    std::printf("model digest %s: %s\n# membership log:\n%s", display_name(key).c_str(), digest.c_str(), result.log.c_str());
    std::fflush(stdout);
  });
  return 0;
}

}  // namespace example
