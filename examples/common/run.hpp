#pragma once
// One algorithm's run on every worker, with the example's settings: its options and schedule,
// the slowed workers, the callbacks, and what rank 0 keeps (report, metrics, curve, trace).
// Example code, not part of the library.
#include <cocod.hpp>
#include <cocod/checkpoint.hpp>
#include <cocod/comm/grouped.hpp>
#include <cocod/model/group_model.hpp>

#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "observer.hpp"
#include "options.hpp"

namespace example {

/// A learning rate chosen at run time: constant, or cosine decay to 0 over the run; either after a
/// linear warm-up from 0 over `warmup` steps (the cosine then spans the steps after it).
struct LearningRate {
  bool cosine = false;
  std::size_t warmup = 0;
  void validate() const {}
  [[nodiscard]] double operator()(double base, std::size_t t, std::size_t total) const {
    if (warmup >= total)
      throw std::invalid_argument("--warmup-steps " + std::to_string(warmup) + " must be less than the run's " +
                                  std::to_string(total) + " steps (raise --epochs or lower --warmup-steps)");
    if (cosine)
      return warmup ? cocod::lr::WarmupCosine{.warmup_steps = warmup}(base, t, total) : cocod::lr::Cosine{}(base, t, total);
    return t < warmup ? base * static_cast<double>(t) / static_cast<double>(warmup) : base;
  }
};
using Schedule = cocod::schedule::Adaptive<LearningRate>;

/// "CoCoD-SGD", or with a variant's modifiers "CoCoD-SGD+outer+int8+f4".
inline std::string display_name(const std::string& key) {
  const Variant v = Variant::parse(key);
  const std::string& b = v.base;
  const std::string name = b == "cocod" ? "CoCoD-SGD" : b == "ssgd" ? "S-SGD" : b == "local" ? "Local-SGD"
                           : b == "overlap-local" ? "Overlap-Local-SGD" : b == "diloco-delayed" ? "Delayed-DiLoCo" : "Pipe-SGD";
  const auto plus = key.find('+');
  return plus == std::string::npos ? name : name + key.substr(plus);
}

/// S-SGD and Pipe-SGD communicate every step: with --period auto each step is their round.
inline bool per_step(const std::string& key) {
  const std::string b = Variant::parse(key).base;
  return b == "ssgd" || b == "pipe";
}

using Metrics = std::vector<std::pair<std::string, double>>;

/// One point of the curve: metrics of the model (the workers' weighted average, or rank 0's with
/// --curve-of rank0) after `wall_s` seconds of training.
struct Point {
  double wall_s, epoch;
  Metrics metrics;
};

struct Result {
  std::string key, sampling;  // algorithm and batch sizes ("equal", "proportional")
  cocod::Report report;
  Metrics metrics;
  std::vector<Point> curve;
  std::shared_ptr<cocod::trace::Timeline> timeline;
  std::vector<std::size_t> last_batch;  // per worker, the last round's M_i (in-process workers)
  std::string digest;                   // of the consensus model (rank 0's)
  std::string resumed;                  // where the run continued from, when it resumed
  std::size_t hiding_steps = 0;         // the last plan's steps that hide one exchange (0: not measured)
};

/// Where one run's checkpoints go: --checkpoint DIR / algorithm [. sampling].
inline std::string checkpoint_folder(const Args& args, const std::string& key, const std::string& sampling) {
  return args.checkpoint + "/" + key + (args.samplings.size() > 1 ? "." + sampling : "");
}

/// Every setting of a run: the options, the local update's and the family's, of which each
/// algorithm is given those it takes (with_optimizer).
template <class Update = cocod::update::Sgd>
struct Settings {
  cocod::Options options;
  Update update;
  std::optional<cocod::Outer> outer;
  cocod::Compress compress;
  cocod::Fragments fragments;
  cocod::OverlapDepth depth;
  cocod::PullBack pull;
  cocod::Delay delay;
};

/// The settings of algorithm `key`: the command line's, with the family's flags where the
/// algorithm takes them and the key's modifiers; the local update `update` (update::Sgd: with
/// --momentum).
inline cocod::Options options_for(const std::string& key, const Args& args) {
  return {.learning_rate = args.learning_rate, .period = per_step(key) && args.auto_period ? 1 : args.period,
          .batch_size = args.batch, .seed = args.seed,
          .non_finite = args.non_finite == "skip"  ? cocod::NonFinite::skip
                        : args.non_finite == "off" ? cocod::NonFinite::off
                                                   : cocod::NonFinite::raise};
}
template <class Update = cocod::update::Sgd>
Settings<Update> settings_for(const std::string& key, const Args& args, const Update& update = {}) {
  Settings<Update> s;
  s.options = options_for(key, args);
  s.update = update;
  if constexpr (std::is_same_v<Update, cocod::update::Sgd>) s.update.momentum = args.momentum;
  const Variant v = Variant::parse(key);
  if ((v.takes_outer() && (v.outer || args.outer != "none")) || v.base == "diloco-delayed")
    s.outer = cocod::Outer{args.outer_lr, args.outer_momentum, args.outer != "sgd" && args.outer_momentum > 0.0};
  if (v.takes_compress())
    s.compress = {v.compress != cocod::Compression::none ? v.compress : cocod::compress::parse(args.compress), args.compress_block};
  if (v.takes_fragments()) {
    s.fragments.count = v.fragments > 0 ? v.fragments : args.fragments;
    s.fragments.merge = s.fragments.count > 1 && (v.lerp || args.fragment_merge == "lerp") ? cocod::FragmentMerge::lerp
                                                                                           : cocod::FragmentMerge::add_back;
    s.fragments.alpha = args.fragment_alpha;
    s.depth.steps = v.depth.value_or(args.overlap_depth);
  }
  if (v.base == "diloco-delayed") {  // its fragments restart from the outer model: no lerp
    s.fragments.merge = cocod::FragmentMerge::add_back;
    s.delay.start = v.start.value_or(args.merge == "delayed" ? cocod::OuterStart::delayed : cocod::OuterStart::eager);
  }
  s.pull = {.alpha = args.pull_alpha, .anchor_momentum = args.anchor_momentum};
  return s;
}

/// --depth-share auto with --period auto: CoCoD-SGD with the automatic depth gets a round twice
/// as long as one exchange needs, which overlaps its second half (the share whose progress,
/// half a round stale, took the fewest epochs in the race's accuracy part, docs/benchmarks.md);
/// every other algorithm 1.
inline constexpr double joint_depth_share = 0.5;

/// The share of a round one exchange may take under --period auto (Adaptive::depth_share).
inline double depth_share_for(const std::string& key, const Args& args) {
  const bool joint = args.auto_period && Variant::parse(key).base == "cocod" && settings_for(key, args).depth.is_automatic();
  return args.depth_share.value_or(joint ? joint_depth_share : 1.0);
}

inline Schedule schedule_for(const std::string& key, const std::string& sampling, const Args& args) {
  return {.lr = LearningRate{args.cosine, args.warmup_steps}, .balance = sampling == "proportional",
          .auto_period = args.auto_period && !per_step(key), .max_period = args.max_period,
          .depth_share = depth_share_for(key, args)};
}

/// The callbacks one worker runs with: progress bar, CSV log, snapshots for the curve.
template <class Model>
Observer<Model> observer_for(const std::string& key, const std::string& sampling, const Args& args, Model& model) {
  Observer<Model> observer;
  if (args.progress) observer.bar.emplace();
  if (!args.csv.empty()) observer.csv.emplace(args.csv + "." + key + (args.samplings.size() > 1 ? "." + sampling : ""));
  if (!args.curve.empty()) {
    observer.model = &model;
    observer.every = args.curve_every;
    observer.every_rank = args.curve_of == "consensus";
  }
  return observer;
}

/// Replaces every worker's snapshots by their weighted average (each worker weighed by its batch
/// size at that round, as the algorithms weigh it): the model a user would get by stopping
/// there. Collectives over `comm` on every worker, after the run, so off its clock; every worker
/// took its snapshots at the same rounds (the epochs are global).
template <class Model, class Comm>
void average_snapshots(Observer<Model>& observer, Comm comm) {
  using B = cocod::backend_of_model_t<Model>;
  using T = cocod::scalar_of_t<Model>;
  cocod::backend::buffer<B, T> batches;
  batches.resize(1);
  for (auto& s : observer.snapshots) {
    const T own[1] = {static_cast<T>(s.batch)};
    T sum[1] = {};
    cocod::backend::store(B{}, batches.span(), 0, std::span<const T>(own));
    comm.all_reduce(batches.span());
    cocod::backend::load(B{}, batches.span(), 0, std::span<T>(sum));
    scale(B{}, s.x.span(), s.x.span(), own[0] / sum[0]);
    comm.all_reduce(s.x.span());
  }
}

/// The curve: each snapshot (rank 0's, or the average) evaluated after the run (not on the
/// clock), then the run's consensus.
template <class Model, class Evaluate>
void record_curve(Result& result, Model& model, Observer<Model>& observer, Evaluate& evaluate) {
  using Backend = cocod::backend_of_model_t<Model>;
  auto x = cocod::as_span(model.parameters());
  cocod::backend::buffer<Backend, cocod::scalar_of_t<Model>> final_x;
  final_x.resize(x.size());
  cocod::backend::copy(Backend{}, final_x.span(), x);
  for (auto& s : observer.snapshots) {
    cocod::backend::copy(Backend{}, x, s.x.span());
    result.curve.push_back({s.wall_s, s.epoch, evaluate(model.inner)});
  }
  cocod::backend::copy(Backend{}, x, final_x.span());
  result.curve.push_back({result.report.seconds, result.report.epochs, result.metrics});
}

/// Calls body.template operator()<Trainer>(settings...) with the trainer type of algorithm `key`
/// on `Comm` and the settings it takes after the communicator, so that the caller builds it where
/// it needs it (as a temporary, or in place).
template <class Model, class Comm, class U, class Body>
void with_algorithm(const std::string& key, const Settings<U>& s, const Schedule& schedule, Body&& body) {
  const std::string b = Variant::parse(key).base;
  const cocod::Options& o = s.options;
  const U& u = s.update;
  if (b == "cocod")
    body.template operator()<cocod::CoCoDSGD<Model, Comm, Schedule, U>>(o, schedule, u, s.outer, s.compress, s.fragments, s.depth);
  else if (b == "ssgd") body.template operator()<cocod::SyncSGD<Model, Comm, Schedule, U>>(o, schedule, u);
  else if (b == "local") body.template operator()<cocod::LocalSGD<Model, Comm, Schedule, U>>(o, schedule, u, s.outer, s.compress);
  else if (b == "overlap-local")
    body.template operator()<cocod::OverlapLocalSGD<Model, Comm, Schedule, U>>(o, schedule, u, s.pull, s.compress);
  else if (b == "diloco-delayed")
    body.template operator()<cocod::DelayedDiLoCo<Model, Comm, Schedule, U>>(o, schedule, u, s.outer, s.compress, s.fragments,
                                                                             s.delay);
  else body.template operator()<cocod::PipeSGD<Model, Comm, Schedule, U>>(o, schedule, u);
}

/// Calls go(optimizer) with the optimizer of algorithm `key` on `comm`, given the settings it takes.
template <class Model, class Comm, class U, class Go>
void with_optimizer(const std::string& key, Comm comm, const Settings<U>& s, const Schedule& schedule, Go&& go) {
  with_algorithm<Model, Comm, U>(key, s, schedule, [&]<class Trainer>(const auto&... settings) { go(Trainer{comm, settings...}); });
}

/// Runs one algorithm on every worker, throttled to `link` when `throttle`. make(rank, workers)
/// builds a worker's model; evaluate(model) returns the example's quality metrics (rank 0);
/// `update` is the local update rule's settings.
template <class Runner, class MakeModel, class Evaluate, class Update>
Result run_one(const Runner& runner, const std::string& key, const std::string& sampling, const Args& args,
               bool throttle, const cocod::comm::Link& link, MakeModel make, Evaluate evaluate, const Update& update) {
  Result result{key, sampling, {}, {}, {}, {}, std::vector<std::size_t>(static_cast<std::size_t>(runner.size()), 0)};
  const Settings<Update> settings = settings_for(key, args, update);
  const Schedule schedule = schedule_for(key, sampling, args);
  if (!args.trace.empty())
    result.timeline = std::make_shared<cocod::trace::Timeline>(
        display_name(key) + (args.samplings.size() > 1 ? " (" + sampling + ")" : ""), runner.size());
  // One rank's run: `comm` the algorithm's communicator, `unthrottled` the same without the link's
  // delays, `rank` its worker's (its group's), `lead` whether it speaks for its worker (member 0
  // of a group), made() its model, measure(model) the example's metrics of it.
  auto train = [&](auto comm, auto unthrottled, int rank, bool lead, auto made, auto measure) {
    const auto r = static_cast<std::size_t>(rank);
    using Model = Slowed<decltype(made())>;
    Model model{made(), r < args.slowdown.size() ? args.slowdown[r] : 1.0};
    Observer<Model> observer = observer_for(key, sampling, args, model);
    if (!lead) observer.bar.reset(), observer.csv.reset();  // one bar and one CSV file per worker
    with_optimizer<Model>(key, comm, settings, schedule, [&](auto&& opt) {
      if (result.timeline && lead) opt.trace(&result.timeline->lane(rank));
      if (lead) opt.on_event(cocod::events::Printer{stderr});  // rank 0's decisions, one line each
      if (observer.every_rank && observer.model) observer.share = [&](auto out) { opt.consensus_share(model, out); };
      cocod::Report report;
      if (args.checkpoint.empty()) {
        report = opt.optimize(model, cocod::Epochs{args.epochs}, observer);
      } else {
        const cocod::Checkpoints store(checkpoint_folder(args, key, sampling));
        if (args.resume) opt.resume_from(store, {.workers_may_change = args.workers_may_change});
        cocod::callbacks::Checkpoint save{opt, model, store, {.rounds = args.checkpoint_every}};
        report = opt.optimize(model, cocod::Epochs{args.epochs}, observer, save);
      }
      if (const cocod::Resumed& from = report.resumed; from && rank == 0)
        result.resumed = from.folder + " (round " + std::to_string(from.round) +
                         (from.step >= report.info.total_steps ? ", where the run had ended: nothing left to train)" : ")") +
                         (from.workers != comm.size() ? ", written by " + std::to_string(from.workers) + " workers" : "");
      if (!report.rounds.empty() && lead) result.last_batch[r] = report.rounds.back().batch_size;  // own entry
      if (observer.every_rank && observer.model) average_snapshots(observer, unthrottled);
      if (rank != 0 || !lead) return;
      result.digest = cocod::model_digest(model);
      result.hiding_steps = opt.info().hiding_steps;
      result.report = std::move(report);
      result.metrics = measure(model.inner);
      if (!args.curve.empty()) record_curve(result, model, observer, measure);
    });
  };
  runner.each([&](auto base) {
    if constexpr (requires { base.inner; base.outer; }) {  // a rank of a group (GroupsRunner)
      using Threads = cocod::comm::Threads;
      const int group = base.outer.rank(), member = base.inner.rank(), members = base.inner.size();
      auto made = [&] { return cocod::GroupModel{make(group * members + member, base.outer.size() * members), base.inner}; };
      auto measure = [&](auto& grouped) { return evaluate(grouped.inner()); };
      const cocod::comm::Grouped<Threads> fast{base.inner, base.outer};
      // (GroupsRunner::throttled: no trainer is compiled for an unthrottled link it never runs on)
      train(cocod::comm::Grouped<Threads, cocod::comm::Throttled<Threads>>{base.inner, {base.outer, link}}, fast, group,
            member == 0, made, measure);
    } else {
      const int rank = base.rank();
      auto made = [&] { return make(rank, base.size()); };
      auto measure = [&](auto& m) { return evaluate(m); };
      if constexpr (!Runner::throttled) {  // (no trainer is compiled for a bare link threads never run on)
        if (!throttle) return train(base, base, rank, true, made, measure);
      }
      train(cocod::comm::Throttled<decltype(base)>{base, link}, base, rank, true, made, measure);
    }
  });
  return result;
}

}  // namespace example
