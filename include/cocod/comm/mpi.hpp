#pragma once
// Workers as MPI processes (Boost.MPI for the environment and datatypes, the MPI C API for the
// collectives). Link the CMake target cocod::mpi.
//
// Open MPI does not progress a non-blocking collective on its own: a posted operation advances
// only inside MPI calls. comm::Mpi therefore supplies the progress, by one of three designs
// (docs/mpi.md compares them on a shaped link):
//   MpiProgress::polling_thread   a communication thread posts non-blocking collectives and
//                                 polls MPI_Test, sleeping between polls (default); blocking
//                                 collectives with nothing in flight run in the caller
//   MpiProgress::blocking_thread  a communication thread that waits in MPI_Wait (Open MPI spins
//                                 there, taking a core from the computation)
//   MpiProgress::caller           no thread: the optimizer calls progress() between local steps
//                                 and the collective advances only then and in wait()
// COCOD_MPI_BOOST (default 1): Boost.MPI initializes MPI and maps types. Set it to 0 to build on
// an MPI that Boost.MPI was not compiled for (Debian's Boost.MPI is built on Open MPI; with MPICH
// use 0): comm::Mpi then calls MPI_Init_thread itself and loses only the constructor from a
// boost::mpi::communicator.
#ifndef COCOD_MPI_BOOST
#define COCOD_MPI_BOOST 1
#endif
#if COCOD_MPI_BOOST
#include <boost/mpi/communicator.hpp>
#include <boost/mpi/datatype.hpp>
#include <boost/mpi/environment.hpp>
#endif
#include <mpi.h>

#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/backend/device_span.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/errors.hpp"
#include "cocod/model/concepts.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/comm/detail/host_staging.hpp"
#include "cocod/comm/detail/ticket_ring.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::comm {

/// How comm::Mpi makes a posted collective advance while the worker computes.
enum class MpiProgress { polling_thread, blocking_thread, caller };

/// Settings of comm::Mpi.
struct MpiOptions {
  MpiProgress progress = MpiProgress::polling_thread;
  /// The polling thread sleeps between two MPI_Test calls, first `poll_min`, then twice as long
  /// after every poll that found the stage unfinished, up to `poll_interval`: small collectives
  /// are noticed within microseconds, long transfers cost few wake-ups (docs/mpi.md).
  std::chrono::microseconds poll_interval{500};
  std::chrono::microseconds poll_min{20};
  /// true: sums are taken in rank order (reduce-scatter by MPI_Ialltoallv, then
  /// MPI_Iallgatherv), bitwise identical to comm::Threads with as many workers. false: the MPI
  /// library's own MPI_Iallreduce, whose order of summation it chooses.
  bool deterministic = true;
};

[[nodiscard]] inline const char* to_string(MpiProgress p) noexcept {
  switch (p) {
    case MpiProgress::polling_thread: return "polling_thread";
    case MpiProgress::blocking_thread: return "blocking_thread";
    case MpiProgress::caller: return "caller";
  }
  return "?";
}

namespace mpi_detail {

template <class T>
MPI_Datatype datatype() {
#if COCOD_MPI_BOOST
  return boost::mpi::get_mpi_datatype<T>();
#else
  return std::is_same_v<T, double> ? MPI_DOUBLE : MPI_FLOAT;
#endif
}

/// Initializes MPI with MPI_THREAD_MULTIPLE unless it already is, and finalizes what it
/// initialized. With an uncaught exception in flight it aborts the job instead (no rank hangs).
#if COCOD_MPI_BOOST
class Environment {
 public:
  Environment(int& argc, char**& argv) : env_(argc, argv, boost::mpi::threading::multiple, true) {}

 private:
  boost::mpi::environment env_;
};
#else
class Environment {
 public:
  Environment(int& argc, char**& argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    int provided = 0;
    check_init(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    owner_ = true;
  }
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
  ~Environment() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!owner_ || finalized) return;
    if (std::uncaught_exceptions() > 0) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
  }

 private:
  static void check_init(int code) {
    if (code != MPI_SUCCESS) throw std::runtime_error("cocod::comm::Mpi: MPI_Init_thread failed");
  }
  bool owner_ = false;
};
#endif

inline const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

inline void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(std::string("cocod::comm::Mpi: ") + what + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

using comm::detail::Op;

/// One collective, advanced stage by stage so that it can be driven by MPI_Test polls.
struct Operation : comm::detail::Collective {
  int stage = 0;  // 0: not started
  MPI_Request request = MPI_REQUEST_NULL;
};

/// The state every copy of one comm::Mpi shares: the duplicated communicator, the queue of
/// collectives (a fixed ring: posting allocates nothing) and the progress engine.
class Engine {
 public:
  Engine(MPI_Comm comm, MpiOptions options) : options_(options) {
    check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    counts_.resize(static_cast<std::size_t>(size_));
    displs_.resize(static_cast<std::size_t>(size_));
    recv_counts_.resize(static_cast<std::size_t>(size_));
    recv_displs_.resize(static_cast<std::size_t>(size_));
    if (options_.progress != MpiProgress::caller) thread_ = std::thread([this] { serve(); });
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] MPI_Comm handle() const noexcept { return comm_; }
  [[nodiscard]] const MpiOptions& options() const noexcept { return options_; }

  std::uint64_t post(const Operation& op) {
    std::unique_lock lock(mutex_);
    if (options_.progress == MpiProgress::caller) {
      // No thread may drain the ring for us: make room by completing the oldest ourselves.
      while (ring_.full()) complete_head(lock, true);
    } else {
      cv_.wait(lock, [&] { return !ring_.full(); });
    }
    const std::uint64_t ticket = ring_.push(op);
    cv_.notify_all();
    if (options_.progress == MpiProgress::caller && ticket == ring_.head_ticket()) advance_head(lock, false);
    return ticket;
  }

  /// A blocking collective: with nothing in flight, the calling thread runs it itself (no
  /// hand-off to the communication thread and back, which costs tens of microseconds); else it
  /// queues behind the others and waits. Rethrows its failure.
  void run(const Operation& op) {
    std::unique_lock lock(mutex_);
    if (options_.progress == MpiProgress::caller || ring_.pending()) {
      lock.unlock();
      wait(post(op));
      return;
    }
    // The communication thread waits for the lock we hold; MPI's blocking collectives are its
    // best-tuned ones (the rank-ordered sum stays the same, so results are bitwise unchanged).
    Operation job = op;
    if (job.is_double)
      execute_blocking<double>(job);
    else
      execute_blocking<float>(job);
  }

  /// Blocks until the ticket's collective completed; rethrows its failure.
  Clock::time_point wait(std::uint64_t ticket) {
    std::unique_lock lock(mutex_);
    if (options_.progress == MpiProgress::caller) {
      while (!ring_.done(ticket)) complete_head(lock, true);
      if (ring_.pending()) advance_head(lock, false);  // start the next one now (Pipe-SGD)
    } else {
      cv_.wait(lock, [&] { return ring_.done(ticket); });
    }
    return ring_.result(ticket);
  }

  /// MpiProgress::caller: one MPI_Test on the oldest collective (and start the next when it
  /// completes). Cheap when nothing is in flight; a no-op for the thread designs.
  void progress() {
    if (options_.progress != MpiProgress::caller) return;
    std::unique_lock lock(mutex_);
    while (ring_.pending() && advance_head(lock, false)) {
    }
  }

 private:
  // Advances the oldest collective; true when it completed (and was retired).
  bool advance_head(std::unique_lock<std::mutex>&, bool block) {
    Operation& op = ring_.head();
    try {
      if (!(op.is_double ? advance<double>(op, block) : advance<float>(op, block))) return false;
      ring_.retire();
    } catch (...) {
      ring_.retire(std::current_exception());
    }
    cv_.notify_all();
    return true;
  }
  void complete_head(std::unique_lock<std::mutex>& lock, bool block) {
    while (!advance_head(lock, block)) {
    }
  }

  void serve() {
    const bool block = options_.progress == MpiProgress::blocking_thread;
    for (;;) {
      Operation* head = nullptr;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return ring_.pending() || closing_; });
        if (!ring_.pending()) return;
        head = &ring_.head();
      }
      // The operation's slot cannot be reused before it is retired, so it is used unlocked.
      Operation& op = *head;
      std::exception_ptr error;
      try {
        auto pause = options_.poll_min;
        for (;;) {
          const int stage = op.stage;
          const bool done = op.is_double ? advance<double>(op, block) : advance<float>(op, block);
          if (done) break;
          if (op.stage != stage) pause = options_.poll_min;  // a new stage starts fast again
          // Keep sleeping while a worker waits, too: polling without pause takes the core from
          // other ranks' compute on a busy machine (measured: CoCoD-SGD's MPI round 36.0 ms with,
          // 33.8 ms without; docs/benchmarks.md).
          std::this_thread::sleep_for(pause);
          pause = std::min(2 * pause, options_.poll_interval);
        }
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard lock(mutex_);
      ring_.retire(error);
      cv_.notify_all();
    }
  }

  // Returns true when the operation completed. `block`: wait in MPI_Wait instead of testing.
  template <class T>
  bool advance(Operation& op, bool block) {
    const MPI_Datatype type = datatype<T>();
    auto finished = [&]() {
      if (block) {
        check(MPI_Wait(&op.request, MPI_STATUS_IGNORE), "MPI_Wait");
        return true;
      }
      int flag = 0;
      check(MPI_Test(&op.request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
      return flag != 0;
    };
    T* data = static_cast<T*>(op.data);
    const int n = checked_count(op.count);
    for (;;) {
      switch (op.stage) {
        case 0:
          if (op.op == Op::broadcast) {
            check(MPI_Ibcast(data, n, type, op.root, comm_, &op.request), "MPI_Ibcast");
          } else if (!options_.deterministic || size_ == 1) {
            check(MPI_Iallreduce(MPI_IN_PLACE, data, n, type, MPI_SUM, comm_, &op.request), "MPI_Iallreduce");
          } else {
            start_reduce_scatter<T>(data, op.count, type, op.request);
          }
          op.stage = 1;
          break;
        case 1:
          if (!finished()) return false;
          if (op.op == Op::broadcast || !options_.deterministic || size_ == 1) {
            op.stage = 0;
            return true;
          }
          // Sum the received slices in rank order, into this rank's slice, then share it.
          sum_own_slice<T>(data, op.count);
          check(MPI_Iallgatherv(MPI_IN_PLACE, 0, type, data, counts_.data(), displs_.data(), type, comm_, &op.request),
                "MPI_Iallgatherv");
          op.stage = 2;
          break;
        default:
          if (!finished()) return false;
          op.stage = 0;
          return true;
      }
    }
  }

  template <class T>
  void execute_blocking(Operation& op) {
    const MPI_Datatype type = datatype<T>();
    T* data = static_cast<T*>(op.data);
    const int n = checked_count(op.count);
    if (op.op == Op::broadcast) {
      check(MPI_Bcast(data, n, type, op.root, comm_), "MPI_Bcast");
    } else if (!options_.deterministic || size_ == 1) {
      check(MPI_Allreduce(MPI_IN_PLACE, data, n, type, MPI_SUM, comm_), "MPI_Allreduce");
    } else {
      prepare_reduce_scatter<T>(op.count);
      check(MPI_Alltoallv(data, counts_.data(), displs_.data(), type, scratch_.data(), recv_counts_.data(),
                          recv_displs_.data(), type, comm_),
            "MPI_Alltoallv");
      sum_own_slice<T>(data, op.count);
      check(MPI_Allgatherv(MPI_IN_PLACE, 0, type, data, counts_.data(), displs_.data(), type, comm_),
            "MPI_Allgatherv");
    }
  }

  static int checked_count(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::invalid_argument("cocod::comm::Mpi: buffers of more than 2^31-1 elements are not supported");
    return static_cast<int>(n);
  }

  // Slice q of n elements is [q n / N, (q+1) n / N), as in comm::Threads.
  void layout(std::size_t n) {
    const auto N = static_cast<std::size_t>(size_);
    for (std::size_t q = 0; q < N; ++q) {
      const std::size_t lo = q * n / N, hi = (q + 1) * n / N;
      counts_[q] = static_cast<int>(hi - lo);
      displs_[q] = static_cast<int>(lo);
    }
  }

  template <class T>
  void start_reduce_scatter(T* data, std::size_t n, MPI_Datatype type, MPI_Request& request) {
    prepare_reduce_scatter<T>(n);
    check(MPI_Ialltoallv(data, counts_.data(), displs_.data(), type, scratch_.data(), recv_counts_.data(),
                         recv_displs_.data(), type, comm_, &request),
          "MPI_Ialltoallv");
  }

  // Slices, receive counts and the scratch space of the reduce-scatter (an all-to-all).
  template <class T>
  void prepare_reduce_scatter(std::size_t n) {
    layout(n);
    const auto r = static_cast<std::size_t>(rank_);
    const int mine = counts_[r];
    for (std::size_t q = 0; q < counts_.size(); ++q) {
      recv_counts_[q] = mine;
      recv_displs_[q] = static_cast<int>(q) * mine;
    }
    const std::size_t bytes = static_cast<std::size_t>(mine) * counts_.size() * sizeof(T);
    if (scratch_.size() < bytes) scratch_.resize(bytes);
  }

  template <class T>
  void sum_own_slice(T* data, std::size_t) {
    const auto r = static_cast<std::size_t>(rank_);
    const auto mine = static_cast<std::size_t>(counts_[r]);
    const T* parts = reinterpret_cast<const T*>(scratch_.data());
    // (parts[0] + parts[1]) + parts[2] ... in rank order, in cache-sized blocks, vectorized
    using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
    constexpr std::size_t block = 4096;
    for (std::size_t b = 0; b < mine; b += block) {
      const auto len = static_cast<Eigen::Index>(std::min(block, mine - b));
      Eigen::Map<Vec> out(data + displs_[r] + b, len);
      out = Eigen::Map<const Vec>(parts + b, len);
      for (std::size_t q = 1; q < counts_.size(); ++q) out += Eigen::Map<const Vec>(parts + q * mine + b, len);
    }
  }

  MpiOptions options_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<int> counts_, displs_, recv_counts_, recv_displs_;
  std::vector<std::byte> scratch_;

  std::mutex mutex_;
  std::condition_variable cv_;
  comm::detail::TicketRing<Operation> ring_;
  bool closing_ = false;
  std::thread thread_;
};

}  // namespace mpi_detail

/// The communicator of one MPI process. A cheap handle: copies share the process's engine.
///
///     int main(int argc, char** argv) {
///       return cocod::comm::Mpi::run(argc, argv, [](cocod::comm::Mpi comm) {
///         MyModel model{shard(comm.rank(), comm.size())};
///         cocod::Optimizer<MyModel, cocod::comm::Mpi> opt{comm, options};
///         opt.optimize(model, cocod::Epochs{5});
///       });
///     }
///
/// Collectives run on a duplicate of the given communicator, so they never match the
/// application's own messages.
class Mpi : public detail::StagedDeviceCollectives<Mpi> {
 public:
  using Request = detail::TicketRequest<mpi_detail::Engine>;

  /// Initializes MPI (requesting MPI_THREAD_MULTIPLE) unless it is already, and uses
  /// MPI_COMM_WORLD. Throws if the thread level MPI provides is too low for the design.
  Mpi(int& argc, char**& argv, MpiOptions options = {}) {
    init(MPI_COMM_WORLD, options, std::make_shared<mpi_detail::Environment>(argc, argv));
  }
  /// Uses a communicator of an MPI that the application initialized.
  explicit Mpi(MPI_Comm comm, MpiOptions options = {}) { init(comm, options, nullptr); }
#if COCOD_MPI_BOOST
  /// Uses a Boost.MPI communicator of an MPI that the application initialized.
  explicit Mpi(const boost::mpi::communicator& comm, MpiOptions options = {}) {
    init(static_cast<MPI_Comm>(comm), options, nullptr);
  }
#endif

  /// Runs fn(Mpi) and returns 0. If fn throws, prints "cocod: rank R failed: <what>" to stderr
  /// and aborts the whole job (MPI_Abort), so that no other rank waits forever.
  template <class F>
    requires std::is_invocable_v<F&, Mpi>
  static int run(int& argc, char**& argv, F&& fn, MpiOptions options = {}) {
    std::optional<Mpi> comm;
    try {
      comm.emplace(argc, argv, options);
      fn(*comm);
    } catch (const std::exception& e) {
      abort_job(e.what());
    } catch (...) {
      abort_job("unknown exception");
    }
    return 0;
  }

  [[nodiscard]] int rank() const noexcept { return engine_->rank(); }
  [[nodiscard]] int size() const noexcept { return engine_->size(); }
  [[nodiscard]] const MpiOptions& options() const noexcept { return engine_->options(); }
  /// The MPI thread support level the library provides.
  [[nodiscard]] int thread_level() const noexcept { return thread_level_; }
  /// The duplicated communicator cocod's collectives use.
  [[nodiscard]] MPI_Comm handle() const noexcept { return engine_->handle(); }

  template <Scalar T>
  void broadcast(std::span<T> buffer, int root) {
    if (root < 0 || root >= size())
      throw std::invalid_argument("cocod::comm::Mpi::broadcast: root " + std::to_string(root) + " is not a rank of " +
                                  std::to_string(size()));
    engine_->run(operation(mpi_detail::Op::broadcast, buffer, root));
  }
  template <Scalar T>
  void all_reduce(std::span<T> buffer) {
    engine_->run(operation(mpi_detail::Op::all_reduce, buffer, 0));
  }
  template <Scalar T>
  [[nodiscard]] Request all_reduce_async(std::span<T> buffer) {
    return Request(engine_.get(), engine_->post(operation(mpi_detail::Op::all_reduce, buffer, 0)));
  }
  /// Device buffers (needs <cocod/backend/cuda.hpp>): staged through host memory, for clusters
  /// without NCCL; results equal those of host buffers.
  using StagedDeviceCollectives::all_reduce;
  using StagedDeviceCollectives::all_reduce_async;
  using StagedDeviceCollectives::broadcast;

  /// Advances collectives in flight (MpiProgress::caller); optimizers call it between steps.
  void progress() { engine_->progress(); }

  /// Ends every process of the job with `code` after printing `message` from this rank.
  [[noreturn]] static void abort_job(const std::string& message, int code = 1) {
    int rank = -1, initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "cocod: rank %d failed: %s\n", rank, message.c_str());
    std::fflush(stderr);
    // Launchers forward output through their own processes; MPICH's hydra can end the job before
    // it forwarded the message above. A moment's grace keeps the reason visible.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (initialized) MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  void init(MPI_Comm comm, MpiOptions options, std::shared_ptr<mpi_detail::Environment> environment) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
      throw std::logic_error("cocod::comm::Mpi: MPI is not initialized (construct Mpi from argc/argv first)");
    MPI_Query_thread(&thread_level_);
    const int needed = options.progress == MpiProgress::caller ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE;
    if (thread_level_ < needed)
      throw std::runtime_error(std::string("cocod::comm::Mpi: progress design '") + to_string(options.progress) +
                               "' needs " + mpi_detail::thread_level_name(needed) + ", but this MPI provides " +
                               mpi_detail::thread_level_name(thread_level_) +
                               " (use MpiProgress::caller, or an MPI built with thread support)");
    if (options.poll_min.count() < 0 || options.poll_interval < options.poll_min)
      throw std::invalid_argument("cocod::comm::MpiOptions: need 0 <= poll_min <= poll_interval (got " +
                                  std::to_string(options.poll_min.count()) + " us and " +
                                  std::to_string(options.poll_interval.count()) + " us)");
    environment_ = std::move(environment);
    // The engine must go before the environment finalizes MPI: members die in reverse order.
    engine_ = std::make_shared<mpi_detail::Engine>(comm, options);
  }

  template <class T>
  static mpi_detail::Operation operation(mpi_detail::Op op, std::span<T> b, int root) {
    mpi_detail::Operation o;
    o.op = op;
    o.is_double = std::is_same_v<T, double>;
    o.data = b.data();
    o.count = b.size();
    o.root = root;
    return o;
  }

  std::shared_ptr<mpi_detail::Environment> environment_;
  std::shared_ptr<mpi_detail::Engine> engine_;
  int thread_level_ = MPI_THREAD_SINGLE;
};

}  // namespace cocod::comm
