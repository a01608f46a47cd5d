#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/run.hpp is internal: include <cocod.hpp>"
#endif
// The parts of a run and the loop over them, under cocod::Trainer. Each part owns its run
// state: the position (step, round), the sampler, the local update, the schedule's window, the
// control slots and the recorder; exchanges belong to the algorithm. The helpers at the end are
// what an algorithm does with them.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cocod/algorithm/detail/agreement.hpp"
#include "cocod/algorithm/detail/archive.hpp"
#include "cocod/algorithm/detail/control.hpp"
#include "cocod/algorithm/detail/exchange.hpp"
#include "cocod/algorithm/detail/outer.hpp"
#include "cocod/algorithm/detail/recorder.hpp"
#include "cocod/algorithm/detail/run_checks.hpp"
#include "cocod/backend/backend.hpp"
#include "cocod/checkpoint/header.hpp"
#include "cocod/checkpoint/store.hpp"
#include "cocod/data/sampler.hpp"
#include "cocod/options.hpp"
#include "cocod/schedule/measurement.hpp"

namespace cocod::detail {

/// Where a run is: all of it run state.
struct Position {
  std::size_t step = 0;           ///< steps taken
  std::size_t round = 0;          ///< the current round
  std::size_t step_in_round = 0;  ///< steps taken in the current round
  std::size_t total_steps = 0;    ///< the run's length, 0 when unknown
  double loss_sum = 0.0;          ///< this worker's losses in the current round
  double learning_rate = 0.0;     ///< of the latest step
  bool round_ended = false;       ///< the latest step ended a round
};

/// Which of the family's options an algorithm takes (Options::outer, compress, fragments).
struct Accepts {
  bool outer = false, compress = false, fragments = false;
};

template <class Model, class Comm, class Schedule, class Update>
class Run {
  using Checks = RunChecks<Model, Comm>;
  using Calls = ModelCalls<Model>;
  using CommImpl = typename Checks::communicator;

 protected:
  using T = typename model_types<Model>::scalar;
  using B = typename model_types<Model>::backend;
  using Span = typename model_types<Model>::span;
  using Exchange = detail::Exchange<CommImpl, B, T>;
  static constexpr bool measuring = schedule::measuring_schedule<Schedule>;
  using UpdateState = typename Update::template State<B, T>;

  /// Validates options (std::invalid_argument naming the field) against the communicator.
  Run(Comm comm, Options options, Schedule schedule = {}, Update update = {})
      : comm_(Checks::make(std::move(comm))), options_(std::move(options)), schedule_(std::move(schedule)), update_(std::move(update)) {
    options_.validate(comm_.size());
    schedule_.validate();
  }
  ~Run() = default;

  /// Refuses (std::invalid_argument naming the field) the family's options that algorithm
  /// `name` does not take, and compression on a communicator without byte collectives.
  void check_family(const char* name, Accepts a) const {
    const std::string algorithm = name;
    if (options_.outer && !a.outer)
      invalid_setting("cocod::Options", "outer", "applies to Local-SGD and CoCoD-SGD, not to " + algorithm, "an outer optimizer");
    if (options_.compress != Compression::none && !a.compress)
      invalid_setting("cocod::Options", "compress",
                      "applies to the model-averaging algorithms (Local-SGD, CoCoD-SGD, Overlap-Local-SGD), not to " + algorithm,
                      compress::name(options_.compress));
    if (options_.compress != Compression::none && !comm::ByteCollectives<CommImpl>)
      invalid_setting("cocod::Options", "compress",
                      "needs a communicator with byte collectives (all_to_all_async, all_gather_async: comm::Local, "
                      "Threads, Throttled and Mpi have them)",
                      compress::name(options_.compress));
    if (options_.fragments != 1 && !a.fragments)
      invalid_setting("cocod::Options", "fragments", "other than 1 applies to CoCoD-SGD, not to " + algorithm, options_.fragments);
  }

  // ---- what an algorithm does ----------------------------------------------------------------

  /// The model's gradient at its current parameters, into g; returns the mean loss.
  double gradient(Model& model, std::span<const std::size_t> batch, Span g) {
    return Calls::loss_and_gradient(model, batch, g);
  }
  /// One local update of x with gradient g (momentum and weight decay as the options say).
  void update(Span x, Span g, T lr) { update_state_.apply(x, g, lr); }
  /// w_i, this worker's weight in every average.
  [[nodiscard]] T weight() const noexcept { return static_cast<T>(info_.weight); }

  /// Sizes an exchange for n parameters and the run's control slots (call it in allocate()). The
  /// run then knows it: it waits for it before a new run and when a step fails.
  void prepare(Exchange& e, std::size_t n) {
    e.resize(n, control_.size());
    exchanges_.push_back(&e);
  }
  /// The same for an exchange of a model of `total` parameters in pieces of at most n (its
  /// `fragments`), compressed as Options::compress says (for an algorithm that takes it).
  void prepare(Exchange& e, std::size_t n, std::size_t total, std::size_t fragments) {
    prepare(e, n);
    if (fragments > 1) e.allow_pieces();
    if (options_.compress != Compression::none)
      e.compress(options_.compress, options_.compress_block, comm_.size(), total, fragments);
  }
  /// Posts e's non-blocking all-reduce, its control slots filled. A compressed exchange (one
  /// that compress() set up) sends the model part's deviation from `reference`, the piece of the
  /// outer model z at `offset` (fragment `fragment`) that every worker holds.
  void post(Exchange& e, Span reference = {}, std::size_t offset = 0, std::size_t fragment = 0) {
    check_idle(e, "post");
    const ControlTag tag = write_control(e);
    if (e.compressed())
      e.post_compressed(comm_, tag, reference, weight(), offset, fragment);
    else
      e.post(comm_, tag);
  }
  /// Waits for e's all-reduce if one is in flight; returns whether one was.
  bool await(Exchange& e) {
    if (!e.in_flight()) return false;
    const auto c = e.wait();
    recorder_.awaited(pos_.step, c.posted, c.done, c.t0, c.t1, e.bytes_sent());
    read_control(e, c.tag);
    return true;
  }
  /// e's all-reduce, blocking (compressed as post() says, `exact`: never).
  void reduce(Exchange& e, Span reference = {}, std::size_t offset = 0, std::size_t fragment = 0, bool exact = false) {
    check_idle(e, "reduce");
    const ControlTag tag = write_control(e);
    const auto t0 = comm::Clock::now();
    if (e.compressed() && !exact) {
      e.post_compressed(comm_, tag, reference, weight(), offset, fragment);
      e.wait();
    } else {
      comm_.all_reduce(e.span());
    }
    recorder_.blocking(pos_.step, t0, comm::Clock::now(),
                       e.compressed() && !exact ? e.bytes_sent() : Exchange::ring_bytes(e.span().size(), comm_.size()));
    read_control(e, tag);
  }
  /// The consensus x = sum_j w_j x_j, through e, blocking. When a worker withheld a
  /// non-finite contribution: the consensus of the others, then as non_finite() says.
  void average(Span x, Exchange& e) {
    scale(B{}, e.model(), x, weight());
    reduce(e, {}, 0, 0, true);
    const bool incomplete = withheld();
    if (incomplete) keep_finite(e.model());
    copy(B{}, x, e.model());
    if (incomplete) non_finite(true);
  }


  // ---- non-finite values (Options::non_finite) --------------------------------------------

  /// True when the reduction just read lacks the contribution of a worker that found a NaN or
  /// an infinity: its model part holds the weighted sum of the others only.
  [[nodiscard]] bool withheld() const noexcept { return !control_.withheld().empty(); }
  /// s / W, W the summed weights of the kept contributions: their weighted average. When no
  /// contribution was kept there is no finite consensus: NonFiniteError, the model as it is.
  void keep_finite(Span s) {
    if (!(control_.kept_weight() > 0.0))  // whatever the policy: nothing finite to continue from
      non_finite_error(" every worker's contribution was non-finite, so no finite consensus is left");
    scale(B{}, s, s, static_cast<T>(1.0 / control_.kept_weight()));
  }
  /// The same for the model part of exchange e; when e is compressed, its result is z + the sum
  /// of the kept deviations (z = `reference`, the piece it was posted with), so the average is
  /// z + (s - z) / W.
  void keep_finite(Exchange& e, Span reference) {
    if (!e.compressed()) return keep_finite(e.model());
    if (!(control_.kept_weight() > 0.0))
      non_finite_error(" every worker's contribution was non-finite, so no finite consensus is left");
    const auto W = static_cast<T>(control_.kept_weight());
    lerp(B{}, e.model(), reference, T(1) / W);  // (1 - 1/W) z + s / W
  }
  /// After an algorithm has dealt with a withheld contribution: NonFinite::raise throws
  /// NonFiniteError on every worker; skip counts the skip (NonFiniteError after max_skips in a
  /// row). `replaced`: this worker's model was replaced by a consensus, so a worker that
  /// withheld its own forgets its momentum and its finding. `left` says in the error where
  /// the models are left, when the default does not (it must be the same on every worker).
  void non_finite(bool replaced, const char* left = nullptr) {
    // A worker whose state was replaced forgets its momentum when that state held a NaN: its
    // own contribution was withheld, or it has found one since.
    if (replaced && (withheld_here_ || control_.found())) {
      if constexpr (requires { update_state_.reset(); }) update_state_.reset();
    }
    if (replaced) control_.forget();
    if (options_.non_finite == NonFinite::raise)
      non_finite_error(left                ? left
                       : replaced          ? " the model is left at the consensus of the finite contributions"
                                           : " the model is left as it was before that update");
    recorder_.skipped();
    const std::size_t skips = control_.skipped();
    if (skips >= options_.max_skips)
      non_finite_error(" " + std::to_string(skips) + " reductions in a row were skipped (Options::max_skips = " +
                       std::to_string(options_.max_skips) + ")");
    control_.clear_withheld();
  }
  /// "cocod: a NaN or an infinity reached round R (step S): rank 1 had a non-finite loss at step
  /// 37, withheld from the reduction;" + `then`.
  [[noreturn]] void non_finite_error(const std::string& then) {
    std::string what = "cocod: a NaN or an infinity in round " + std::to_string(pos_.round) + " (step " +
                       std::to_string(pos_.step) + "):";
    for (const auto& w : control_.withheld())
      what += " rank " + std::to_string(w.rank) + (w.what == 1 ? " had a non-finite loss" : " had a non-finite gradient or parameters") +
              " at step " + std::to_string(w.step) + ",";
    what += " withheld from the reduction;";
    control_.clear_withheld();
    throw NonFiniteError(what + then);
  }
  [[nodiscard]] bool guarded() const noexcept { return options_.non_finite != NonFinite::off; }

  // ---- the loop, for cocod::Trainer ------------------------------------------------------------

  template <class Allocate, class Start>
  void setup(Model& model, const char* name, Allocate&& allocate, Start&& start) {
    if (running_) throw std::logic_error("cocod: begin() called twice without finish()");
    drain();  // what a failed run left in flight
    exchanges_.clear();
    const auto run_start = comm::Clock::now();
    Span x = Calls::parameters(model);
    plan_ = schedule_.plan(options_, comm_.rank(), comm_.size());
    samples_ = Calls::num_samples(std::as_const(model));
    const Agreed agreed = agree(comm_, x.size(), samples_, plan_.batch_size);
    comm_.broadcast(x, 0);

    info_ = RunInfo{name, comm_.rank(), comm_.size(), x.size(), plan_.period, plan_.batch_size, agreed.total_batch,
                    static_cast<double>(plan_.batch_size) / static_cast<double>(agreed.total_batch),
                    agreed.total_samples / static_cast<double>(agreed.total_batch), 0};
    sampler_ = BatchSampler(samples_, options_.seed, info_.rank);
    if constexpr (measuring) batch_.reserve(info_.total_batch);  // the most a re-plan may assign
    batch_.assign(plan_.batch_size, 0);
    window_.start(info_.workers);
    control_.start(guarded(), static_cast<std::size_t>(info_.workers), window_.slots());
    update_state_ = update_.template start<B, T>(options_, x.size());
    allocate(x.size());
    pos_ = Position{};
    recorder_.start(info_, run_start, options_.report_rounds);
    running_ = true;
    start(x);
  }
  // ---- a model's buffers (cocod::BufferedModel) -------------------------------------------------

  /// At begin(): every worker holds as many buffer elements as rank 0 (DistributedError on every
  /// worker otherwise), then rank 0's buffers.
  void start_buffers(Span b) {
    std::array<double, 2> count{static_cast<double>(b.size()), static_cast<double>(b.size()) * static_cast<double>(b.size())};
    comm_.all_reduce(std::span<double>(count));
    // All sizes are equal exactly when N sum(n^2) == (sum n)^2 (exact in double while N n^2 < 2^53).
    if (static_cast<double>(info_.workers) * count[1] != count[0] * count[0])
      throw DistributedError("cocod: the workers' models have different numbers of buffer elements (buffers()): rank " +
                             std::to_string(info_.rank) + " has " + std::to_string(b.size()) +
                             "; every worker must build the same model");
    comm_.broadcast(b, 0);
  }
  /// At a round's end: b = sum_i w_i b_i, blocking. A NaN or an infinity in any worker's buffers
  /// makes the average so on every worker: a NonFiniteError on all of them (unless the guard is off).
  void average_buffers(Span b) {
    if (b.size() == 0) return;
    const auto t0 = comm::Clock::now();
    scale(B{}, b, b, weight());
    comm_.all_reduce(b);
    recorder_.blocking(pos_.step, t0, comm::Clock::now(), Exchange::ring_bytes(b.size(), comm_.size()));
    if (guarded() && !all_finite(B{}, b))
      throw NonFiniteError("cocod: the average of the models' buffers() is not finite at step " +
                           std::to_string(pos_.step) + " (a worker's buffers hold a NaN or an infinity)");
  }

  void set_length(std::size_t total_steps) {
    pos_.total_steps = info_.total_steps = total_steps;
    recorder_.reserve(info_, measuring ? total_steps : total_steps / plan_.period);
  }

  /// The model's parameters during a run (`who` names the call in the error otherwise).
  Span parameters(Model& model, const char* who) {
    if (!running_) throw std::logic_error(std::string("cocod: ") + who + "() called before begin()");
    Span x = Calls::parameters(model);
    if (x.size() != info_.parameters)
      throw std::logic_error("cocod: the model's parameter count changed during the run (" +
                             std::to_string(info_.parameters) + " -> " + std::to_string(x.size()) + ")");
    return x;
  }
  void check_batch(std::span<const std::size_t> batch) const {
    for (const std::size_t i : batch)
      if (i >= samples_)
        throw std::out_of_range("cocod: step(): batch index " + std::to_string(i) + " is outside this worker's shard (rank " +
                                std::to_string(info_.rank) + " has " + std::to_string(samples_) + " samples)");
  }
  std::span<const std::size_t> draw() {
    sampler_.next(batch_);
    return batch_;
  }

  /// One step: compute(lr) -> loss, communicate(lr), and at the round's end end_round(). A step
  /// that throws ends the run: what is in flight is waited for, and begin() may start anew.
  template <class Compute, class Communicate, class EndRound>
  double run_step(Compute&& compute, Communicate&& communicate, EndRound&& end_round) {
    try {
      return step_parts(compute, communicate, end_round);
    } catch (...) {
      abandon();
      throw;
    }
  }
  /// Ends a run that failed: waits for what is in flight, without a consensus.
  void abandon() noexcept {
    drain();
    running_ = false;
  }
  template <class Compute, class Communicate, class EndRound>
  double step_parts(Compute& compute, Communicate& communicate, EndRound& end_round) {
    const auto t0 = comm::Clock::now();
    if (pos_.step_in_round == 0) {
      recorder_.begin_round(pos_.round, pos_.step, plan_.period, plan_.batch_size, t0);
      pos_.loss_sum = 0.0;
    }
    pos_.learning_rate = schedule_.learning_rate(options_, pos_.step, pos_.total_steps);
    const auto lr = static_cast<T>(pos_.learning_rate);
    const double waited_before = recorder_.waited();
    const double loss = compute(lr);
    if (guarded() && !std::isfinite(loss)) control_.non_finite(1, pos_.step);
    if constexpr (requires { comm_.progress(); }) comm_.progress();  // communicators without a thread
    for (Exchange* e : exchanges_) e->advance();                      // a compressed exchange's second collective
    pos_.loss_sum += loss;
    if (pos_.step_in_round + 1 == plan_.period) loss_ready(plan_.period);
    communicate(lr);
    recorder_.step(pos_.step, t0, comm::Clock::now(), waited_before);
    ++pos_.step;
    ++pos_.step_in_round;
    pos_.round_ended = false;
    if (pos_.step_in_round == plan_.period) {
      end_round();
      close_round();
    }
    return loss;
  }
  void close_partial_round() {
    if (pos_.step_in_round == 0) return;
    loss_ready(pos_.step_in_round);
    close_round();
  }
  Report end_run() {
    running_ = false;
    return recorder_.finish(pos_.step, epochs());
  }

  // ---- checkpoints, for cocod::Trainer --------------------------------------------------------

  /// What this worker's file says of it (rank, sizes, where the run is).
  [[nodiscard]] checkpoint::Header header(std::size_t parameters, const char* algorithm) const {
    return {algorithm, sizeof(T), static_cast<std::uint32_t>(comm_.size()), static_cast<std::uint32_t>(comm_.rank()),
            parameters, pos_.round, pos_.step, info_.weight, checkpoint::fingerprint(options_)};
  }

  /// This worker's checkpoint file: the header, then every part's state in a fixed order. Only
  /// between rounds: what is in flight is completed first (settled, not yet handed over).
  template <class Algorithm>
  std::vector<std::byte> save_state(Model& model, Span x, Algorithm algorithm) {
    for (Exchange* e : exchanges_) e->settle();
    SaveArchive a;
    checkpoint::write_header(a.file(), header(x.size(), info_.algorithm.c_str()), options_);
    serialize_parts(a, model, x, algorithm);
    return std::move(a).finish();
  }
  /// Restores every part from a file that fits this run (checked by the caller), in a run that
  /// setup() and set_length() have just started.
  template <class Algorithm>
  void load_state(const checkpoint::FileReader& file, Model& model, Span x, Algorithm algorithm) {
    LoadArchive a(file);
    serialize_parts(a, model, x, algorithm);
  }

  /// Writes this worker's file into the checkpoint of the current round and, once every worker
  /// has written its own (agreed in one all-reduce), rank 0 writes the manifest; a failure on
  /// any worker is a CheckpointError on every worker, and the previous checkpoint stays whole.
  template <class Bytes>
  void write_checkpoint(const Checkpoints& store, Bytes&& bytes) {
    const auto n = static_cast<std::size_t>(comm_.size()), rank = static_cast<std::size_t>(comm_.rank());
    CheckpointInfo c{store.folder(pos_.round), info_.algorithm, pos_.round, pos_.step, comm_.size(), {}};
    std::vector<double> table(2 * n, 0.0);  // per worker: file size, CRC-32
    std::string error;
    // A manifest already in this round's folder (a second save at one boundary, an older run in
    // the directory) would vouch for files about to be replaced: it goes first, and nobody
    // writes before it is gone.
    if (rank == 0) {
      try {
        Checkpoints::retract(c.folder);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    std::vector<double> none;
    agree_on_failure<CheckpointError>(comm_, error, none);
    try {
      const std::vector<std::byte> data = bytes();
      Checkpoints::make_folder(c.folder);
      Checkpoints::write_atomically(c.folder / Checkpoints::file_name(comm_.rank()), data);
      table[rank] = static_cast<double>(data.size());
      table[n + rank] = static_cast<double>(checkpoint::crc32(data));
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "cocod: checkpoint " + c.folder.string() + ": this worker's state could not be saved (an exception of unknown type)";
    }
    agree_on_failure<CheckpointError>(comm_, error, table);
    for (std::size_t j = 0; j < n; ++j)
      c.files.push_back({Checkpoints::file_name(static_cast<int>(j)), static_cast<std::uint64_t>(table[j]),
                         static_cast<std::uint32_t>(table[n + j])});
    if (rank == 0) {
      try {
        store.commit(c);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    agree_on_failure<CheckpointError>(comm_, error, none);  // nobody goes on before the manifest is there
  }

  /// The newest complete checkpoint in `store`, the same on every worker (or none on all); a
  /// manifest that cannot be read, a file it lists that is missing or of the wrong size, or
  /// workers that see different checkpoints: CheckpointError on every worker.
  std::optional<CheckpointInfo> find_checkpoint(const Checkpoints& store) {
    const auto n = static_cast<std::size_t>(comm_.size());
    std::optional<CheckpointInfo> found;
    std::vector<double> table(n, 0.0);  // per worker: 1 + the round of its checkpoint, 0 for none
    std::string error;
    try {
      found = store.latest();
      if (found) Checkpoints::check_files(*found);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (found) table[static_cast<std::size_t>(comm_.rank())] = static_cast<double>(found->round) + 1.0;
    agree_on_failure<CheckpointError>(comm_, error, table);
    auto seen = [&](std::size_t j) { return table[j] == 0.0 ? std::string("none") : "round " + std::to_string(static_cast<std::size_t>(table[j]) - 1); };
    for (std::size_t j = 1; j < n; ++j)
      if (table[j] != table[0])
        throw CheckpointError("cocod: the workers see different checkpoints (rank 0: " + seen(0) + ", rank " +
                              std::to_string(j) + ": " + seen(j) + "): every worker must name the same directory");
    return found;
  }
  /// Runs f on every worker; when it throws on any, on_fail() runs and every worker throws the
  /// same CheckpointError (the lowest failing rank's message).
  template <class F, class OnFail>
  void agreed(F&& f, OnFail&& on_fail) {
    std::string error;
    try {
      f();
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "cocod: resuming failed on this worker (an exception of unknown type)";
    }
    std::vector<double> none;
    try {
      agree_on_failure<CheckpointError>(comm_, error, none);
    } catch (...) {
      on_fail();
      throw;
    }
  }
  template <class F>
  void agreed(F&& f) {
    agreed(std::forward<F>(f), [] {});
  }
  [[nodiscard]] std::size_t parameters_of(Model& model) { return Calls::parameters(model).size(); }
  /// Throws CheckpointError unless `file` (rank `rank`'s of checkpoint `c`) fits this run.
  void check_file(const checkpoint::FileReader& file, const CheckpointInfo& c, std::size_t parameters,
                  const char* algorithm, bool any_workers, int rank = -1) const {
    const auto h = checkpoint::read_header(file);
    checkpoint::check_fits(file, h, header(parameters, algorithm), options_, any_workers);
    const auto expected = static_cast<std::uint32_t>(rank < 0 ? comm_.rank() : rank);
    if (h.rank != expected || h.round != c.round || h.step != c.step || h.workers != static_cast<std::uint32_t>(c.workers))
      file.fail("does not match its manifest (rank " + std::to_string(h.rank) + ", round " + std::to_string(h.round) +
                ", step " + std::to_string(h.step) + "; the manifest: rank " + std::to_string(expected) + ", round " +
                std::to_string(c.round) + ", step " + std::to_string(c.step) + ")");
  }
  /// Starts a run from checkpoint `c` of another number of workers: x = sum_j w_j x_j over the
  /// saved workers (in rank order, the same on every new worker), their step and round
  /// counters; everything else starts anew. `begin` starts the run.
  template <class Begin>
  void elastic_start(Model& model, const CheckpointInfo& c, bool allowed, const char* algorithm, Begin&& begin) {
    Span x = Calls::parameters(model);
    std::vector<T> consensus(x.size(), T(0));
    std::vector<std::byte> model_state;
    checkpoint::Header first{};
    agreed([&] {
      if (!allowed)
        throw CheckpointError("cocod: checkpoint " + c.folder.string() + " does not fit this run: the number of workers differs (checkpoint: " +
                              std::to_string(c.workers) + ", this run: " + std::to_string(comm_.size()) +
                              "); to continue from its consensus model with the new number, resume with workers_may_change = true");
      for (int j = 0; j < c.workers; ++j) {
        const auto bytes = Checkpoints::read_file(c, j);
        const checkpoint::FileReader file(bytes, c.file(j).string());
        check_file(file, c, x.size(), algorithm, true, j);
        const auto h = checkpoint::read_header(file);
        if (j == 0) first = h;
        const auto w = static_cast<T>(h.weight);
        const auto part = file.fields("parameters").template values<T>("x", x.size());
        for (std::size_t i = 0; i < x.size(); ++i) consensus[i] = j == 0 ? w * part[i] : consensus[i] + w * part[i];
        if constexpr (StatefulModel<Model>)
          if (j == comm_.rank() % c.workers) {
            const auto s = file.fields("model").bytes("state");
            model_state.assign(s.begin(), s.end());
          }
      }
    });
    copy_in(x, consensus);
    if constexpr (StatefulModel<Model>) model.load_state(std::span<const std::byte>(model_state));
    begin();
    pos_.step = static_cast<std::size_t>(first.step);
    pos_.round = static_cast<std::size_t>(first.round);
  }

  [[nodiscard]] double epochs() const {
    return info_.steps_per_epoch > 0 ? static_cast<double>(pos_.step) / info_.steps_per_epoch : 0.0;
  }

  CommImpl comm_;
  Options options_;
  Schedule schedule_;
  Update update_;

  // the parts, each with its run state
  RunInfo info_{};
  schedule::Plan plan_{};
  Position pos_{};
  std::size_t samples_ = 0;
  BatchSampler sampler_{};
  std::vector<std::size_t> batch_;  // scratch of next_batch()
  UpdateState update_state_{};
  schedule::Window<Schedule> window_{};
  ControlSlots<T> control_{};
  Recorder recorder_{};
  std::vector<Exchange*> exchanges_;  // the algorithm's, from prepare()
  bool running_ = false;
  bool withheld_here_ = false;  // this worker withheld its contribution from the latest reduction read

 private:
  /// The round's mean loss over `steps` steps travels with the next reduced buffer.
  void loss_ready(std::size_t steps) { control_.loss_ready(pos_.round, pos_.loss_sum / static_cast<double>(steps)); }
  void drain() noexcept {
    for (Exchange* e : exchanges_) e->drain();
  }
  void check_idle(const Exchange& e, const char* what) const {
    if (e.in_flight())
      throw std::logic_error(std::string("cocod: ") + what + "() on an exchange whose collective is in flight; await() it first");
    if (e.control_size() != control_.size())
      throw std::logic_error(std::string("cocod: ") + what + "() on an exchange that was not prepare()d for this run");
  }
  ControlTag write_control(Exchange& e) {
    const bool measured = window_.write(control_.extra(), info_.rank);
    bool withheld = false;
    if (guarded()) {  // a NaN or an infinity never enters a reduction: it would reach every worker
      if (!control_.found() && !all_finite(B{}, e.model())) control_.non_finite(2, pos_.step);
      withheld = control_.found();
      if (withheld) zero(B{}, e.model());
    }
    ControlTag tag = control_.write(info_.weight, measured, static_cast<std::size_t>(info_.rank), pos_.step);
    tag.withheld = withheld;
    store(B{}, e.span(), e.control_offset(), std::span<const T>(control_.staging()));
    return tag;
  }
  void read_control(Exchange& e, ControlTag tag) {
    load(B{}, e.span(), e.control_offset(), control_.staging());
    control_.read(tag);
    withheld_here_ = tag.withheld;
    if (const std::string steps = control_.out_of_step(); !steps.empty())
      throw DistributedError("cocod: the workers are out of step: one reduction joined " + steps +
                             " (every worker must take the same steps: the same run length, period and stop)");
    if (tag.measured)
      window_.read(std::span<const T>(control_.extra()), schedule_, options_, info_.rank, info_.workers,
                   info_.total_batch, plan_);
  }

  void close_round() {
    const RoundStats& now = recorder_.current();
    window_.add(schedule_, schedule::RoundSample{pos_.round, now.compute_s,
                                                 static_cast<double>(pos_.step_in_round * plan_.batch_size),
                                                 now.comm_s, recorder_.take_collectives()});
    recorder_.close_round([&](RoundStats& r) {
      r.steps = pos_.step_in_round;
      r.loss = pos_.loss_sum / static_cast<double>(pos_.step_in_round);
      r.learning_rate = pos_.learning_rate;
      r.epoch = epochs();
      r.consensus_loss = control_.state().consensus_loss;
      r.consensus_loss_round = control_.state().consensus_round;
    });
    ++pos_.round;
    pos_.step_in_round = 0;
    pos_.round_ended = true;
    schedule::Plan next;
    if (window_.take(next)) apply(next);  // every worker at the same round boundary
  }
  template <class Archive, class Algorithm>
  void serialize_parts(Archive& a, Model& model, Span x, Algorithm& algorithm) {
    section(a, "position", [&](auto& f) {
      f("step", pos_.step);
      f("round", pos_.round);
      f("step_in_round", pos_.step_in_round);
      f("loss_sum", pos_.loss_sum);
      f("learning_rate", pos_.learning_rate);
      f("round_ended", pos_.round_ended);
      f("period", plan_.period);
      f("batch_size", plan_.batch_size);
      if constexpr (!Archive::saving) {
        if (pos_.step_in_round != 0) f.fail("step_in_round", "is not 0: the checkpoint was not taken between rounds");
        if (plan_.period == 0 || plan_.batch_size == 0 || plan_.batch_size > info_.total_batch)
          f.fail("period", "and batch_size are not a plan this run can have (corrupt)");
      }
    });
    if constexpr (!Archive::saving) apply(plan_);
    section(a, "sampler", [&](auto& f) { sampler_.serialize(f); });
    section(a, "update", [&](auto& f) {
      if constexpr (requires { update_state_.serialize(f); })
        update_state_.serialize(f);
      else  // (a compile error would break optimize() for every update rule without checkpoints)
        throw std::logic_error("cocod: the Update's State cannot be checkpointed: give it a member `template <class "
                               "Archive> void serialize(Archive& a)` that names its run state, empty if it has none");
    });
    section(a, "window", [&](auto& f) { window_.serialize(f); });
    section(a, "control", [&](auto& f) { control_.serialize(f); });
    section(a, "report", [&](auto& f) { recorder_.serialize(f); });
    for (std::size_t i = 0; i < exchanges_.size(); ++i)
      section(a, "exchange." + std::to_string(i), [&](auto& f) { exchanges_[i]->serialize(f); });
    // After the exchanges: loading, the algorithm checks that what they hold in flight fits it.
    section(a, "algorithm", [&](auto& f) { algorithm(f); });  // its serialize(f)
    section(a, "parameters", [&](auto& f) { f.span("x", x); });
    if constexpr (StatefulModel<Model>) {
      section(a, "model", [&](auto& f) {
        if constexpr (Archive::saving) {
          std::vector<std::byte> state;
          std::as_const(model).save_state(state);
          f.bytes("state", state);
        } else {
          model.load_state(f.bytes("state"));
        }
      });
    }
  }
  void apply(const schedule::Plan& p) {
    plan_ = p;
    info_.period = p.period;
    info_.batch_size = p.batch_size;
    info_.weight = static_cast<double>(p.batch_size) / static_cast<double>(info_.total_batch);
    batch_.resize(p.batch_size);  // within the capacity reserved at set-up
  }
};

}  // namespace cocod::detail
