#pragma once
// The examples' common command line: which algorithms, the communicator and the link, training
// settings and outputs. An example adds its own options to app() before parse(). Example code,
// not part of the library.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <netdb.h>

#include <cocod/rendezvous/token.hpp>

#include "cli.hpp"
#include "variant.hpp"

namespace example {

struct Args {
  std::string program = "example";  // argv[0], for messages
  std::vector<std::string> algorithms{"cocod", "ssgd", "local", "pipe"};
  int workers = 2;
  int group_size = 1;            // --group-size: ranks per group (threads); each group one worker
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
  std::string comm = "threads";  // or "mpi": one worker per MPI process, "nccl": one per GPU
  std::string mpi_progress = "polling_thread";
  bool mpi_native = false;       // MPI's own all-reduce instead of the rank-ordered one
  double mpi_poll_us = 500;      // polling thread's longest sleep between MPI_Test calls
  double mpi_stall_timeout_s = 300;  // a collective without progress for this long ends the job (0: never)
  std::string store;             // --comm gloo: HOST:PORT of the rendezvous store
  int rank = -1;                 // --comm gloo: this process's rank
  bool serve_store = false;      // --comm gloo: rank 0 serves the store itself
  double connect_timeout_s = 60; // --comm gloo, elastic: how long to wait for the store or coordinator and the peers
  std::string hostname;          // --comm gloo, elastic: the address the peers reach this process at
  std::string token;             // --comm gloo, elastic: the run's token (--token-file, else COCOD_TOKEN)
  std::string coordinator;       // --comm elastic: HOST:PORT of the coordinator
  int min_workers = 0;           // --comm elastic: the least workers in an epoch (0: the coordinator's)
  std::optional<std::size_t> elastic_leave_after;  // --leave-after-round: a scripted leave
  std::vector<std::size_t> elastic_script;         // --replay: the rounds of a log's changes
  std::size_t snapshot_every = 1;                  // --snapshot-every: rounds between two states kept
  bool link_given = false;       // --bandwidth or --latency on the command line
  bool auto_period = false;      // --period auto: the smallest k with k*c >= m + 2 sd(m), re-measured
  std::size_t max_period = 32;
  std::optional<double> depth_share;  // --depth-share; nullopt: auto (depth_share_for())
  std::vector<std::string> samplings{"equal"};  // and/or "proportional" (from measured speeds)
  std::vector<double> slowdown;  // per rank, 1 = normal speed (empty: nobody slowed)
  bool cosine = false;           // --lr-schedule cosine
  std::size_t warmup_steps = 0;  // --warmup-steps: a linear warm-up from 0 over the first steps
  std::string trace;             // Chrome trace file
  std::string curve;             // CSV of the metrics against wall time
  double curve_every = 0.5;      // epochs between two points of the curve
  std::string curve_of = "consensus";  // whose model a point measures: consensus or rank0
  bool brief = false;            // the short table (the demo's)
  double comm_ratio = 1.0;       // --compute-ratio: with --latency auto, m = k*c / comm_ratio
  std::string checkpoint;        // directory of checkpoints, one folder per algorithm (and sampling)
  std::size_t checkpoint_every = 10;  // rounds between two checkpoints
  bool resume = false;           // continue each run from its newest checkpoint
  bool workers_may_change = false;  // --resume with another number of workers: from the consensus
  std::string non_finite = "raise";  // what a NaN or an infinity does: raise, skip or off
  std::string outer = "none";        // the outer optimizer of cocod and local: none, sgd or nesterov
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  std::string compress = "none";     // what cocod, local and overlap-local send: none, bf16, fp16, int8
  std::size_t compress_block = 256;
  std::size_t fragments = 1;         // cocod: one of F fragments exchanged per round
  std::size_t overlap_depth = cocod::OverlapDepth::whole_round;  // cocod: the steps its exchange overlaps
  std::string fragment_merge = "add-back";
  double fragment_alpha = 0.5;
  double pull_alpha = 0.2;           // overlap-local's pull towards the anchor
  double anchor_momentum = 0.0;      // overlap-local's anchor momentum
  std::string merge = "eager";       // diloco-delayed: eager or delayed starts
};

/// The communicators this build offers (--comm).
inline std::vector<std::string> communicators() {
  std::vector<std::string> c{"threads"};
#ifdef COCOD_HAS_MPI
  c.push_back("mpi");
#endif
#if defined(COCOD_HAS_GLOO) && !defined(__CUDACC__)
  c.push_back("gloo");
  c.push_back("elastic");
#endif
#if defined(COCOD_HAS_NCCL) && defined(__CUDACC__)
  c.push_back("nccl");
#endif
  return c;
}

/// Why this build has no comm::Mpi, as the refusal of an MPI flag says it; empty when it has one.
inline std::string without_mpi() {
#if defined(COCOD_HAS_MPI)
  return {};
#elif defined(__CUDACC__)
  return "is not taken by the CUDA example, whose workers are threads or GPUs (the other examples take it)";
#else
  return "needs cocod built with MPI (Debian: apt-get install libboost-mpi-dev, then configure and build again)";
#endif
}

/// Why this build has no comm::Gloo (nor elastic runs); empty when it has it.
inline std::string without_gloo() {
#if defined(COCOD_HAS_GLOO) && !defined(__CUDACC__)
  return {};
#elif defined(__CUDACC__)
  return "is not taken by the CUDA example, whose workers are threads or GPUs (the other examples take it)";
#else
  return "needs cocod built with Gloo (Debian: apt-get install libgloo-dev, then configure and build again)";
#endif
}

/// --comm: one of communicators(); a communicator this build lacks is refused saying what to install.
inline CLI::Validator communicator_check() {
  return CLI::Validator(
      [](std::string& text) {
        const auto known = communicators();
        if (std::find(known.begin(), known.end(), text) != known.end()) return std::string();
        if (text == "mpi") return "mpi " + without_mpi();
        if (text == "gloo" || text == "elastic") return text + " " + without_gloo();
#ifndef __CUDACC__
        if (text == "nccl")
          return std::string("nccl is the CUDA example's (cuda_least_squares, built where nvcc is found with "
                             "-DCOCOD_ENABLE_CUDA=ON)");
#endif
        return cli::one_of(known)(text);
      },
      "");
}

/// HOST:PORT whose host resolves (a name or an address) and whose port is 1 to 65535.
inline CLI::Validator address_check() {
  return CLI::Validator(
      [](std::string& text) {
        const auto colon = text.rfind(':');
        unsigned long long port = 0;
        if (colon == std::string::npos || colon == 0 || !cli::parse_whole(text.substr(colon + 1), 1, 65535, port))
          return "needs HOST:PORT with a port from 1 to 65535, like 127.0.0.1:29500" + cli::got(text);
        std::string host = text.substr(0, colon);
        if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* found = nullptr;
        const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
        if (rc != 0) return "cannot resolve the host '" + host + "': " + ::gai_strerror(rc);
        ::freeaddrinfo(found);
        return std::string();
      },
      "");
}

/// --slowdown R:F,...: ranks (whole numbers) and factors >= 1.
inline CLI::Validator slowdown_check() {
  return CLI::Validator(
      [](std::string& text) {
        const auto items = cli::split(text);
        if (items.empty()) return "needs RANK:FACTOR pairs, like 2:3.0" + cli::got(text);
        for (const auto& item : items) {
          const auto colon = item.find(':');
          unsigned long long rank = 0;
          double factor = 0;
          if (colon == std::string::npos || !cli::parse_whole(item.substr(0, colon), 0, 4095, rank))
            return "needs RANK:FACTOR pairs with a rank from 0 to 4095, like 2:3.0" + cli::got(item);
          if (!cli::parse_real(item.substr(colon + 1), 1, 1e6, false, false, factor))
            return "needs a factor from 1 to 1e6 after the rank, like 2:3.0" + cli::got(item);
        }
        return std::string();
      },
      "");
}

/// What --slowdown of a rank beyond the workers is told.
inline std::string slowdown_beyond(std::size_t rank, int workers) {
  return "--slowdown: worker " + std::to_string(rank) + " does not exist (" + std::to_string(workers) + " workers, ranks 0 to " +
         std::to_string(workers - 1) + ")";
}

/// A whole number in [min, max] or one of `words` ("auto", "k").
inline CLI::Validator whole_or(std::vector<std::string> words, unsigned long long min, unsigned long long max) {
  return CLI::Validator(
      [=](std::string& text) {
        unsigned long long v = 0;
        for (const auto& w : words)
          if (text == w) return std::string();
        if (cli::parse_whole(text, min, max, v)) return std::string();
        std::string choices = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
        for (std::size_t i = 0; i < words.size(); ++i) choices += (i + 1 == words.size() ? " or '" : ", '") + words[i] + "'";
        return "needs " + choices + cli::got(text);
      },
      "");
}

/// A number in [min, max] (above min when `above`) or "auto".
inline CLI::Validator real_or_auto(double max, double min = 0, bool above = false) {
  return CLI::Validator(
      [=](std::string& text) {
        double v = 0;
        if (text == "auto" || cli::parse_real(text, min, max, above, false, v)) return std::string();
        return "needs a number " + std::string(above ? "above " : "from ") + cli::number_text(min) + (above ? " up to " : " to ") +
               cli::number_text(max) + " or 'auto'" + cli::got(text);
      },
      "");
}

/// The common options, bound to an Args; the example adds its own to app().
class Cli {
 public:
  /// `what`: the example's one-line summary; `defaults`: its settings when no flag is given.
  Cli(const std::string& what, Args defaults) : a_(std::move(defaults)), app_(what) {
    cli::last_value_wins(app_);
    app_.get_formatter()->column_width(26);
    text_.algo = a_.algorithms == all_keys() ? "all" : cli::join(a_.algorithms);
    text_.period = a_.auto_period ? "auto" : std::to_string(a_.period);
    text_.sampling = cli::join(a_.samplings);
    text_.latency = a_.latency_us ? cli::number_text(*a_.latency_us) : "auto";
    text_.lr_schedule = a_.cosine ? "cosine" : "constant";
    text_.depth_share = a_.depth_share ? cli::number_text(*a_.depth_share) : "auto";
    add_algorithms();
    add_link();
    add_training();
    add_family();
    add_output();
  }

  CLI::App& app() { return app_; }

  /// Parses the command line: --help prints the options and exits 0; a bad value or an unknown
  /// flag prints a message naming the flag and exits 2.
  Args parse(int argc, char** argv) {
    program_ = argc > 0 ? argv[0] : "example";
    cli::parse(app_, argc, argv);
    return settings();
  }

  /// Whether `flag` was on the command line (false for a flag this example does not have).
  [[nodiscard]] bool given(const std::string& flag) const {
    const CLI::Option* option = app_.get_option_no_throw(flag);
    return option != nullptr && option->count() > 0;
  }

 private:
  void add_algorithms();
  void add_link();
  void add_mpi(const char* group);
  void add_gloo(const char* group);
  void add_training();
  void add_family();
  void add_output();
  void add_unavailable(const char* flag, bool takes_value, const std::string& why);
  Args settings() const;

  Args a_;
  CLI::App app_;
  struct {
    std::string algo, period, sampling, latency, lr_schedule, overlap_depth = "k", depth_share = "auto";
    std::vector<std::string> slowdown;  // one entry per --slowdown
    std::string replay;                 // --replay R,...
    std::string token_file;             // --token-file FILE
  } text_;  // options read as text, turned into a_'s fields by settings()
  bool no_progress_ = false;
  std::string program_ = "example";
  std::vector<std::pair<std::string, std::string>> unavailable_;  // a flag this build lacks, and why
};

/// A flag of a part this build lacks: hidden from --help, and refused by name with what to
/// install when given (rather than "unknown", or absent from the checks that ask for it).
inline void Cli::add_unavailable(const char* flag, bool takes_value, const std::string& why) {
  if (takes_value) app_.add_option(flag)->group("");
  else app_.add_flag(flag)->group("");
  unavailable_.emplace_back(flag, why);
}

inline void Cli::add_algorithms() {
  const char* g = "Algorithms";
  app_.add_option("--algo", text_.algo,
                  "algorithms to run, comma-separated: cocod, ssgd, local, pipe, overlap-local,\n"
                  "diloco-delayed or all (the first four); a key may add +outer,\n"
                  "+bf16|fp16|int8, +fN, +lerp, +dTAU, +dauto, +eager or +delayed\n"
                  "(cocod+outer+int8+f4: the outer step, int8 deviations, 4 fragments;\n"
                  "cocod+d2: overlap depth 2; diloco-delayed+delayed: the naive delay)")
      ->type_name("LIST")->capture_default_str()->check(algorithm_list())->group(g);
  app_.add_option("--period", text_.period,
                  "local steps per round, or 'auto': the smallest k with k*compute >= one\n"
                  "all-reduce plus two standard deviations of it, measured and re-checked\n"
                  "during the run")
      ->type_name("K|auto")->capture_default_str()->check(whole_or({"auto"}, 1, 1000000))->group(g);
  app_.add_option("--max-period", a_.max_period, "the largest k that --period auto may choose")
      ->type_name("K")->capture_default_str()->check(cli::whole(1, 1000000))->group(g);
  app_.add_option("--depth-share", text_.depth_share,
                  "with --period auto: the share of a round that one exchange may take\n"
                  "(k = the smallest k with S*k*compute >= one all-reduce); 'auto': 1, and\n"
                  "for cocod with --overlap-depth auto (+dauto) the share that reached a\n"
                  "target accuracy soonest in the race (docs/guide.md)")
      ->type_name("S|auto")->capture_default_str()->check(real_or_auto(1, 0, true))->group(g);
  app_.add_option("--sampling", text_.sampling,
                  "equal, proportional or both (comma-separated): batch sizes equal, or\n"
                  "proportional to the workers' speeds measured during the run")
      ->type_name("LIST")->capture_default_str()->check(cli::list_of({"equal", "proportional"}))->group(g);
  app_.add_option("--slowdown", text_.slowdown, "make worker R F times slower (it sleeps F-1 times its compute time)")
      ->type_name("R:F,..")->check(slowdown_check())->group(g)
      ->expected(1)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

inline void Cli::add_link() {
  const char* g = "Workers and link";
  std::string comm_help = "threads: in-process workers";
#ifdef COCOD_HAS_MPI
  comm_help += "; mpi: one worker per MPI process under mpiexec";
#endif
#if defined(COCOD_HAS_GLOO) && !defined(__CUDACC__)
  comm_help += ";\ngloo: one worker per process (--rank of --workers), over TCP, found through --store;\n"
               "elastic: one worker per process of a run whose workers may come and go (--coordinator)";
#endif
#if defined(COCOD_HAS_NCCL) && defined(__CUDACC__)
  comm_help += "; nccl: one worker per GPU";
#endif
  app_.add_option("--comm", a_.comm, comm_help)
      ->type_name(cli::join(communicators(), "|"))->capture_default_str()->check(communicator_check())->group(g);
  app_.add_option("--workers", a_.workers,
                  without_gloo().empty() ? "in-process workers with --comm threads; processes with --comm gloo"
                                         : "in-process workers")
      ->type_name("N")->capture_default_str()->check(cli::whole(1, 4096))->group(g);
  app_.add_option("--group-size", a_.group_size,
                  "with --comm threads: the workers form groups of G ranks, each group one worker of\n"
                  "the algorithm: its ranks average their gradients every step over a fast link,\n"
                  "and each rank exchanges 1/G of the model over the throttled link between groups")
      ->type_name("G")->capture_default_str()->check(cli::whole(1, 4096))->group(g);
  std::vector<std::string> networks = communicators();
  networks.erase(networks.begin());  // all but threads
  std::string bandwidth_help = "throttle collectives to a link of this bandwidth in Gbit/s";
  if (!networks.empty())
    bandwidth_help += "\nwith --comm " + cli::join(networks, " or ") + ": the real network, unless --bandwidth or\n"
                      "--latency is given";
  app_.add_option("--bandwidth", a_.bandwidth_gbit, bandwidth_help)
      ->type_name("GBIT")->capture_default_str()->check(cli::positive(1e6))->group(g);
  app_.add_option("--latency", text_.latency,
                  "link latency in microseconds; 'auto' picks it so that one all-reduce\n"
                  "costs about K local steps")
      ->type_name("US|auto")->capture_default_str()->check(real_or_auto(1e9))->group(g);
  app_.add_option("--compute-ratio", a_.comm_ratio, "with --latency auto: one all-reduce costs K local steps / R")
      ->type_name("R")->capture_default_str()->check(cli::positive(1e6))->group(g);
  add_mpi(g);
  add_gloo(g);
}

inline void Cli::add_gloo([[maybe_unused]] const char* g) {
#if defined(COCOD_HAS_GLOO) && !defined(__CUDACC__)
  app_.add_option("--store", a_.store,
                  "with --comm gloo: HOST:PORT of the rendezvous store (the coordinator program,\n"
                  "or rank 0 with --serve-store)")
      ->type_name("HOST:PORT")->check(address_check())->group(g);
  app_.add_option("--rank", a_.rank, "with --comm gloo: this process's rank, 0 to --workers - 1")
      ->type_name("R")->check(cli::whole(0, 4095))->group(g);
  app_.add_flag("--serve-store", a_.serve_store, "with --comm gloo: rank 0 serves the store at --store's port")->group(g);
  app_.add_option("--hostname", a_.hostname,
                  "with --comm gloo or elastic: the address the other processes reach this one at\n"
                  "(default: this machine's host name)")
      ->type_name("HOST")->group(g);
  app_.add_option("--token-file", text_.token_file,
                  "with --comm gloo or elastic: the run's shared secret is in FILE (default: the\n"
                  "environment variable COCOD_TOKEN; the store or coordinator refuses a wrong one)")
      ->type_name("FILE")->group(g);
  app_.add_option("--coordinator", a_.coordinator, "with --comm elastic: HOST:PORT of the cocod-coordinator program")
      ->type_name("HOST:PORT")->check(address_check())->group(g);
  app_.add_option("--connect-timeout", a_.connect_timeout_s,
                  "with --comm gloo or elastic: how long to wait for the store (or the coordinator)\n"
                  "and the peers to answer before giving up with an error")
      ->type_name("S")->capture_default_str()->check(cli::real(0.1, 1e6))->group(g);
  app_.add_option("--min-workers", a_.min_workers,
                  "with --comm elastic: the run waits until this many workers are alive (at the\n"
                  "start and after a loss); default: the coordinator's --min-workers")
      ->type_name("N")->check(cli::whole(1, 4096))->group(g);
  app_.add_option("--leave-after-round", a_.elastic_leave_after,
                  "with --comm elastic: this worker leaves the run once R rounds completed")
      ->type_name("R")->check(cli::whole(1, 100000000))->group(g);
  app_.add_option("--replay", text_.replay,
                  "with --comm elastic: replay a membership log: the members end their epoch\n"
                  "after these rounds (the log's \"starts: round R\"), and only there")
      ->type_name("R,...")->group(g);
  app_.add_option("--snapshot-every", a_.snapshot_every,
                  "with --comm elastic: keep the state in memory every R rounds (a loss costs\n"
                  "the rounds since; each kept state ends the overlap of its round)")
      ->type_name("R")->capture_default_str()->check(cli::whole(1, 100000000))->group(g);
#else
  for (const char* flag : {"--store", "--rank", "--hostname", "--token-file", "--coordinator", "--connect-timeout", "--min-workers",
                           "--leave-after-round", "--replay", "--snapshot-every"})
    add_unavailable(flag, true, without_gloo());
  add_unavailable("--serve-store", false, without_gloo());
#endif
}

inline void Cli::add_mpi([[maybe_unused]] const char* g) {
#ifdef COCOD_HAS_MPI
  app_.add_option("--mpi-progress", a_.mpi_progress, "who drives MPI's progress with --comm mpi")
      ->type_name("P")->capture_default_str()->check(cli::one_of({"polling_thread", "blocking_thread", "caller"}))->group(g);
  app_.add_option("--mpi-poll-us", a_.mpi_poll_us, "the polling thread's longest sleep between MPI_Test calls (>= 1)")
      ->type_name("US")->capture_default_str()->check(cli::real(1, 1e7))->group(g);
  app_.add_flag("--mpi-native", a_.mpi_native, "MPI's own all-reduce (not bitwise equal to --comm threads)")->group(g);
  app_.add_option("--mpi-stall-timeout", a_.mpi_stall_timeout_s,
                  "a collective that makes no progress for S seconds ends the job on every rank,\n"
                  "naming the ranks that have not begun it (0: never)")
      ->type_name("S")->capture_default_str()->check(cli::real(0, 1e7))->group(g);
#else
  for (const char* flag : {"--mpi-progress", "--mpi-poll-us", "--mpi-stall-timeout"}) add_unavailable(flag, true, without_mpi());
  add_unavailable("--mpi-native", false, without_mpi());
#endif
}

inline void Cli::add_training() {
  const char* g = "Training";
  app_.add_option("--epochs", a_.epochs, "passes over the data")
      ->type_name("E")->capture_default_str()->check(cli::positive(1e6))->group(g);
  app_.add_option("--lr", a_.learning_rate, "learning rate")
      ->type_name("RATE")->capture_default_str()->check(cli::positive(1e6))->group(g);
  app_.add_option("--lr-schedule", text_.lr_schedule, "constant, or cosine: decay to 0 over the run")
      ->type_name("S")->capture_default_str()->check(cli::one_of({"constant", "cosine"}))->group(g);
  app_.add_option("--warmup-steps", a_.warmup_steps,
                  "a linear warm-up of the learning rate from 0 over the first N steps (with\n"
                  "--lr-schedule cosine, the cosine spans the steps after it)")
      ->type_name("N")->capture_default_str()->check(cli::whole(0, 1ull << 40))->group(g);
  app_.add_option("--momentum", a_.momentum, "local momentum, in [0, 1)")
      ->type_name("MU")->capture_default_str()->check(cli::real(0, 1, false, true))->group(g);
  app_.add_option("--batch", a_.batch, "mini-batch size per worker")
      ->type_name("M")->capture_default_str()->check(cli::whole(1, 1ull << 30))->group(g);
  app_.add_option("--non-finite", a_.non_finite,
                  "what a NaN or an infinity in a loss, a gradient or the parameters does:\n"
                  "raise (stop with an error), skip (skip those batches) or off (no check)")
      ->type_name("P")->capture_default_str()->check(cli::one_of({"raise", "skip", "off"}))->group(g);
  app_.add_option("--seed", a_.seed, "seed of data and sampling")
      ->type_name("S")->capture_default_str()->check(cli::whole(0, 1000000000000000000ull))->group(g);
}

inline void Cli::add_family() {
  const char* g = "Outer optimizer, compression, fragments";
  app_.add_option("--outer", a_.outer,
                  "the outer optimizer of cocod and local on each round's average: none,\n"
                  "sgd (heavy ball) or nesterov (DiLoCo's with the defaults below);\n"
                  "diloco-delayed always has one: nesterov unless sgd")
      ->type_name("O")->capture_default_str()->check(cli::one_of({"none", "sgd", "nesterov"}))->group(g);
  app_.add_option("--outer-lr", a_.outer_lr, "the outer learning rate")
      ->type_name("ETA")->capture_default_str()->check(cli::positive(1e6))->group(g);
  app_.add_option("--outer-momentum", a_.outer_momentum, "the outer momentum, in [0, 1)")
      ->type_name("BETA")->capture_default_str()->check(cli::real(0, 1, false, true))->group(g);
  app_.add_option("--compress", a_.compress,
                  "what cocod, local, overlap-local and diloco-delayed send: none (the\n"
                  "model; diloco-delayed: its progress), or bf16, fp16 or int8 deviations\n"
                  "from the outer model (diloco-delayed: the progress), with error feedback")
      ->type_name("C")->capture_default_str()->check(cli::one_of({"none", "bf16", "fp16", "int8"}))->group(g);
  app_.add_option("--compress-block", a_.compress_block, "elements per scale of fp16 and int8")
      ->type_name("B")->capture_default_str()->check(cli::whole(1, 1ull << 30))->group(g);
  app_.add_option("--fragments", a_.fragments, "cocod and diloco-delayed exchange one of F slices of the model per\nround")
      ->type_name("F")->capture_default_str()->check(cli::whole(1, 1ull << 20))->group(g);
  app_.add_option("--overlap-depth", text_.overlap_depth,
                  "cocod takes its snapshot after step k - TAU of each round and merges it\n"
                  "at the round's end: the exchange overlaps TAU steps and the progress it\n"
                  "merges is TAU steps stale; k: the whole round (CoCoD-SGD); 0: Local-SGD\n"
                  "(without fragments); auto: the fewest steps whose compute hides one\n"
                  "all-reduce as --period auto measures it (the whole round until measured)")
      ->type_name("TAU|k|auto")->capture_default_str()->check(whole_or({"k", "auto"}, 0, 1000000))->group(g);
  app_.add_option("--fragment-merge", a_.fragment_merge,
                  "how a fragment's average merges under cocod: add-back (keeps the\n"
                  "progress made while it was in flight) or lerp (with --fragment-alpha)")
      ->type_name("M")->capture_default_str()->check(cli::one_of({"add-back", "lerp"}))->group(g);
  app_.add_option("--fragment-alpha", a_.fragment_alpha, "lerp's weight of the local model, in [0, 1]")
      ->type_name("A")->capture_default_str()->check(cli::real(0, 1))->group(g);
  app_.add_option("--pull-alpha", a_.pull_alpha, "overlap-local: the pull towards the anchor, in (0, 1]")
      ->type_name("A")->capture_default_str()->check(cli::real(0, 1, true, false))->group(g);
  app_.add_option("--anchor-momentum", a_.anchor_momentum, "overlap-local: the anchor momentum, in [0, 1)")
      ->type_name("MU")->capture_default_str()->check(cli::real(0, 1, false, true))->group(g);
  app_.add_option("--merge", a_.merge,
                  "diloco-delayed: each round's progress lands a round late on the outer\n"
                  "model; eager: each worker starts from its own outer step on its fresh\n"
                  "progress and the others' latest; delayed: from the outer model (the\n"
                  "naive delay); its outer step takes --outer-lr and --outer-momentum,\n"
                  "Nesterov unless --outer sgd (DiLoCo's by default)")
      ->type_name("M")->capture_default_str()->check(cli::one_of({"eager", "delayed"}))->group(g);
}

inline void Cli::add_output() {
  const char* g = "Output";
  app_.add_option("--csv", a_.csv, "also write the per-round log of every algorithm to FILE.<algorithm>")
      ->type_name("FILE")->check(cli::writable_file())->group(g);
  app_.add_option("--trace", a_.trace,
                  "write a Chrome trace (chrome://tracing, ui.perfetto.dev) of every run's\n"
                  "steps, waits and all-reduces per worker to FILE")
      ->type_name("FILE")->check(cli::writable_file())->group(g);
  app_.add_option("--curve", a_.curve,
                  "write the metrics of the model against wall time to FILE (CSV): each\n"
                  "point the weighted average of every worker's model then (taken off the\n"
                  "clock, evaluated after the run), the last the run's consensus")
      ->type_name("FILE")->check(cli::writable_file())->group(g);
  app_.add_option("--curve-every", a_.curve_every, "epochs between two points of the curve")
      ->type_name("E")->capture_default_str()->check(cli::positive(1e6))->group(g);
  app_.add_option("--curve-of", a_.curve_of,
                  "whose model a point of the curve measures: consensus (the weighted\n"
                  "average of the workers'), or rank0 (rank 0's own, for comparison)")
      ->type_name("WHOSE")->capture_default_str()->check(cli::one_of({"consensus", "rank0"}))->group(g);
  app_.add_option("--checkpoint", a_.checkpoint,
                  "save each algorithm's run into DIR/<algorithm>, every\n"
                  "--checkpoint-every rounds (the newest 2 are kept)")
      ->type_name("DIR")->check(cli::writable_folder())->group(g);
  app_.add_option("--checkpoint-every", a_.checkpoint_every, "rounds between two checkpoints (needs --checkpoint)")
      ->type_name("R")->capture_default_str()->check(cli::whole(1, 1ull << 40))->group(g);
  app_.add_flag("--resume", a_.resume,
                "continue each algorithm's run from its newest checkpoint in --checkpoint DIR\n"
                "(from the start when there is none); give the other flags as before")
      ->group(g);
  app_.add_flag("--workers-may-change", a_.workers_may_change,
                "with --resume: a checkpoint of another number of workers continues from\n"
                "its consensus model (momentum and the sampler start anew)")
      ->group(g);
  app_.add_flag("--brief", a_.brief,
                "the short table: epochs, metrics, wall time, time per round and per\n"
                "step, time waited, speedup")->group(g);
  app_.add_flag("--no-progress", no_progress_, "no progress bars")->group(g);
}

inline Args Cli::settings() const {
  for (const auto& [flag, why] : unavailable_)
    if (given(flag)) cli::refuse(program_, flag + " " + why);
  Args a = a_;
  a.program = program_;
  a.algorithms.clear();
  for (const auto& item : cli::split(text_.algo)) {
    if (item == "all") a.algorithms.insert(a.algorithms.end(), all_keys().begin(), all_keys().end());
    else a.algorithms.push_back(item);
  }
  a.auto_period = text_.period == "auto";
  if (!a.auto_period) a.period = std::stoull(text_.period);
  if (text_.depth_share != "auto") a.depth_share = std::stod(text_.depth_share);
  if (a.depth_share && !a.auto_period) cli::refuse(program_, "--depth-share needs --period auto (a fixed period stands)");
  a.samplings = cli::split(text_.sampling);
  for (const auto& item : cli::split(cli::join(text_.slowdown))) {
    const auto colon = item.find(':');
    const auto rank = static_cast<std::size_t>(std::stoull(item.substr(0, colon)));
    if (a.slowdown.size() <= rank) a.slowdown.resize(rank + 1, 1.0);
    a.slowdown[rank] = std::stod(item.substr(colon + 1));
  }
  if ((a.comm == "threads" || a.comm == "gloo") && a.slowdown.size() > static_cast<std::size_t>(a.workers))
    cli::refuse(program_, slowdown_beyond(a.slowdown.size() - 1, a.workers));
  a.latency_us = text_.latency == "auto" ? std::nullopt : std::optional<double>(std::stod(text_.latency));
  a.link_given = given("--bandwidth") || given("--latency");
  a.cosine = text_.lr_schedule == "cosine";
  a.overlap_depth = text_.overlap_depth == "k"      ? cocod::OverlapDepth::whole_round
                    : text_.overlap_depth == "auto" ? cocod::OverlapDepth::automatic
                                                    : std::stoull(text_.overlap_depth);
  if (no_progress_) a.progress = false;
  for (const char* flag : {"--checkpoint-every", "--resume"})
    if (given(flag) && !given("--checkpoint")) cli::refuse(program_, std::string(flag) + " needs --checkpoint DIR");
  if (a.group_size > 1) {
    if (a.comm != "threads") cli::refuse(program_, "--group-size needs --comm threads");
    if (a.workers % a.group_size != 0)
      cli::refuse(program_, "--group-size " + std::to_string(a.group_size) + " does not divide --workers " +
                                std::to_string(a.workers));
    if (!a.checkpoint.empty()) cli::refuse(program_, "--group-size does not take --checkpoint");
  }
  if (a.comm == "gloo") {
    if (a.store.empty()) cli::refuse(program_, "--comm gloo needs --store HOST:PORT");
    if (a.rank < 0) cli::refuse(program_, "--comm gloo needs --rank R (0 to --workers - 1)");
    if (a.rank >= a.workers)
      cli::refuse(program_, "--rank " + std::to_string(a.rank) + " is not a rank of --workers " + std::to_string(a.workers));
  } else {
    for (const char* flag : {"--store", "--rank", "--serve-store"})
      if (given(flag)) cli::refuse(program_, std::string(flag) + " needs --comm gloo");
  }
  if (a.comm == "elastic") {
    if (a.coordinator.empty()) cli::refuse(program_, "--comm elastic needs --coordinator HOST:PORT");
    if (!given("--algo")) a.algorithms = {"cocod"};
    if (a.algorithms.size() != 1) cli::refuse(program_, "--comm elastic trains one --algo (got " + std::to_string(a.algorithms.size()) + ")");
    for (const auto& item : cli::split(text_.replay)) {
      if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 9)
        cli::refuse(program_, "--replay takes round numbers, like 12,40 (got '" + text_.replay + "')");
      a.elastic_script.push_back(std::stoull(item));
    }
  } else {
    for (const char* flag : {"--coordinator", "--min-workers", "--leave-after-round", "--replay", "--snapshot-every"})
      if (given(flag)) cli::refuse(program_, std::string(flag) + " needs --comm elastic");
    for (const char* flag : {"--hostname", "--token-file"})
      if (given(flag) && a.comm != "gloo") cli::refuse(program_, std::string(flag) + " needs --comm gloo or elastic");
  }
  if (a.comm == "gloo" || a.comm == "elastic") {
    try {
      a.token = cocod::rendezvous::run_token(text_.token_file);
    } catch (const std::invalid_argument& e) {
      cli::refuse(program_, std::string("--token-file: ") + e.what());
    }
  }
  if (a.workers_may_change && !a.resume) cli::refuse(program_, "--workers-may-change needs --resume");
  if (a.outer == "nesterov" && a.outer_momentum == 0.0)
    cli::refuse(program_, "--outer nesterov needs --outer-momentum > 0");
  bool fragmented = a.fragments > 1;
  for (const auto& key : a.algorithms) fragmented = fragmented || Variant::parse(key).fragments > 1;
  if (a.fragment_merge == "lerp" && !fragmented)
    cli::refuse(program_, "--fragment-merge lerp needs --fragments > 1 (or an --algo key with +fN)");
  return a;
}

}  // namespace example
