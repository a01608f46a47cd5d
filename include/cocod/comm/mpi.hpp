#pragma once
// Workers as MPI processes (Boost.MPI for the environment and datatypes, the MPI C API for the
// collectives). Link the CMake target cocod::mpi.
//
// Open MPI does not progress a non-blocking collective on its own: a posted operation advances
// only inside MPI calls. comm::Mpi therefore supplies the progress, by one of three designs
// (docs/mpi.md compares them on a shaped link):
//   MpiProgress::polling_thread   a communication thread posts non-blocking collectives and
//                                 polls MPI_Test, sleeping between polls (default)
//   MpiProgress::blocking_thread  a communication thread that waits in MPI_Wait (Open MPI spins
//                                 there, taking a core from the computation)
//   MpiProgress::caller           no thread: the trainer calls progress() between local steps
//                                 and the collective advances only then and in wait()
// Blocking collectives (all_reduce, broadcast, all_to_all, all_gather) run in the caller, in
// every design, once the posted ones completed: MPI never matches a blocking collective with a
// non-blocking one.
// Every collective is preceded by an exchange of descriptions (collectives.hpp): ranks that call
// different collectives, or whose communicator went away while others still call, raise the
// same DistributedError on every rank; MpiOptions::stall_timeout ends a collective that makes
// no progress with cocod::Aborted (docs/mpi.md).
// COCOD_MPI_BOOST (default 1): Boost.MPI initializes MPI and maps types. Set it to 0 to build on
// an MPI that Boost.MPI was not compiled for (Debian's Boost.MPI is built on Open MPI; with MPICH
// use 0): comm::Mpi then calls MPI_Init_thread itself and loses only the constructor from a
// boost::mpi::communicator.
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "cocod/backend/device_span.hpp"
#include "cocod/backend/scalar.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/errors.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/comm/detail/byte_blocks.hpp"
#include "cocod/comm/detail/host_staging.hpp"
#include "cocod/comm/detail/mpi/environment.hpp"
#include "cocod/comm/detail/mpi/options.hpp"
#include "cocod/comm/detail/mpi/progress.hpp"
#include "cocod/comm/detail/ticket_ring.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::comm {

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
/// application's own messages. A Request's ready() says whether its collective completed; under
/// MpiProgress::caller it advances the collectives in flight first, as progress() does.
class Mpi : public detail::StagedDeviceCollectives<Mpi> {
 public:
  using Request = detail::TicketRequest<mpi_detail::Engine>;

  /// Initializes MPI (requesting MPI_THREAD_MULTIPLE) unless it is already, and uses
  /// MPI_COMM_WORLD. Throws if the thread level MPI provides is too low for the design, if
  /// `options` are invalid, or (std::system_error) if the communication thread cannot start.
  Mpi(int& argc, char**& argv, MpiOptions options = {}) {
    auto environment = std::make_shared<mpi_detail::Environment>(argc, argv);
    try {
      init(MPI_COMM_WORLD, options, environment);
    } catch (...) {
      // Kept, not destroyed by the unwinding, which would abort the job (see keep_until_exit):
      // the exception stays catchable, and Mpi::run reports it with the rank.
      mpi_detail::keep_until_exit(std::move(environment));
      throw;
    }
  }
  /// Uses a communicator of an MPI that the application initialized.
  explicit Mpi(MPI_Comm comm, MpiOptions options = {}) { init(comm, options, nullptr); }
#if COCOD_MPI_BOOST
  /// Uses a Boost.MPI communicator of an MPI that the application initialized.
  explicit Mpi(const boost::mpi::communicator& comm, MpiOptions options = {}) {
    init(static_cast<MPI_Comm>(comm), options, nullptr);
  }
#endif

  /// Runs fn(Mpi) and returns fn's result if it is an int (the exit status for main), else 0.
  /// If fn throws, or comm::Mpi cannot be set up (see the constructor), prints
  /// "cocod: rank R failed: <what>" to stderr and aborts the whole job (MPI_Abort), so that no
  /// other rank waits forever. So too when fn returned while other ranks still call
  /// collectives: every rank raises DistributedError ("rank 1 returned while rank 0 calls ...").
  template <class F>
    requires std::is_invocable_v<F&, Mpi>
  static int run(int& argc, char**& argv, F&& fn, MpiOptions options = {}) {
    int status = 0;
    {
      std::optional<Mpi> comm;
      try {
        comm.emplace(argc, argv, options);
        if constexpr (std::is_same_v<std::invoke_result_t<F&, Mpi>, int>)
          status = fn(*comm);
        else
          fn(*comm);
        // Peers still calling collectives learn that this rank returned (DistributedError on
        // every rank, here too) instead of waiting for it forever.
        comm->engine_->depart();
      } catch (const std::exception& e) {
        abort_job(e.what());
      } catch (...) {
        abort_job("unknown exception");
      }
    }
    return status;
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
    detail::check_root("cocod::comm::Mpi::broadcast", root, size());
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
  /// Personalized all-to-all of bytes (MPI_Ialltoall of MPI_BYTE): send and recv hold N blocks
  /// of b bytes each (N = size(), equal sizes, not overlapping); block j of send goes to rank j,
  /// block q of recv comes from rank q. Blocking: like all_reduce, it runs once the collectives
  /// posted before it completed. Bad sizes, or blocks of more than 2^31-1 bytes, throw
  /// std::invalid_argument; ranks that call different collectives or block sizes raise the same
  /// DistributedError.
  void all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) {
    engine_->run(byte_operation(mpi_detail::Op::all_to_all, "cocod::comm::Mpi::all_to_all", send, recv));
  }
  /// all_to_all, returning at once: both buffers belong to the communicator until wait() returns.
  /// It runs after the collectives posted before it, advanced by the progress design.
  [[nodiscard]] Request all_to_all_async(std::span<const std::byte> send, std::span<std::byte> recv) {
    return Request(engine_.get(), engine_->post(byte_operation(mpi_detail::Op::all_to_all,
                                                               "cocod::comm::Mpi::all_to_all_async", send, recv)));
  }
  /// Broadcast of bytes (MPI_Bcast of MPI_BYTE): every rank gets root's buffer (equal sizes on
  /// every rank, at most 2^31-1 bytes). Blocking, as all_to_all.
  void broadcast(std::span<std::byte> buffer, int root) {
    detail::check_root("cocod::comm::Mpi::broadcast", root, size());
    (void)mpi_detail::checked_count(buffer.size());
    engine_->run(mpi_detail::Operation(detail::byte_broadcast(buffer, root)));
  }
  /// All-gather of bytes (MPI_Iallgather of MPI_BYTE): send is one block of b bytes, recv N
  /// blocks; block q of recv is rank q's send. send may be recv's block rank() (then in place,
  /// MPI_IN_PLACE); otherwise they must not overlap. Blocking, as all_to_all.
  void all_gather(std::span<const std::byte> send, std::span<std::byte> recv) {
    engine_->run(byte_operation(mpi_detail::Op::all_gather, "cocod::comm::Mpi::all_gather", send, recv));
  }
  /// all_gather, returning at once: both buffers belong to the communicator until wait() returns.
  [[nodiscard]] Request all_gather_async(std::span<const std::byte> send, std::span<std::byte> recv) {
    return Request(engine_.get(), engine_->post(byte_operation(mpi_detail::Op::all_gather,
                                                               "cocod::comm::Mpi::all_gather_async", send, recv)));
  }

  /// Device buffers (needs <cocod/backend/cuda.hpp>): staged through host memory, for clusters
  /// without NCCL; results equal those of host buffers.
  using StagedDeviceCollectives::all_reduce;
  using StagedDeviceCollectives::all_reduce_async;
  using StagedDeviceCollectives::broadcast;

  /// The ranks of this communicator that give the same `colour`, ordered by `key` (then by their
  /// rank here), as a communicator of their own with these options (MPI_Comm_split). A
  /// collective: every rank calls it, before any collective of this one is in flight. Groups of
  /// G consecutive ranks (comm::Grouped): split(rank() / G, rank() % G) joins a group's members,
  /// split(rank() % G, rank() / G) the same member of every group.
  [[nodiscard]] Mpi split(int colour, int key) const {
    if (colour < 0)  // MPI_UNDEFINED would leave this rank without a communicator
      throw std::invalid_argument("cocod::comm::Mpi::split: colour must be >= 0 (got " + std::to_string(colour) +
                                  "): every rank joins a group");
    MPI_Comm sub = MPI_COMM_NULL;
    mpi_detail::check(MPI_Comm_split(handle(), colour, key, &sub), "MPI_Comm_split");
    return adopt(sub);
  }
  /// The ranks of this communicator on this node (that can share memory: MPI_COMM_TYPE_SHARED),
  /// ordered by `key`: the group of a node. A collective, like split().
  [[nodiscard]] Mpi split_by_node(int key) const {
    MPI_Comm sub = MPI_COMM_NULL;
    mpi_detail::check(MPI_Comm_split_type(handle(), MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, &sub), "MPI_Comm_split_type");
    return adopt(sub);
  }

  /// Advances collectives in flight (MpiProgress::caller); trainers call it between steps.
  void progress() { engine_->progress(); }

  /// Ends every process of the job with `code` after printing `message` from this rank.
  [[noreturn]] static void abort_job(const std::string& message, int code = 1) { mpi_detail::abort_job(message, code); }

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
    mpi_detail::check_options(options);
    environment_ = std::move(environment);
    // The engine must go before the environment finalizes MPI: members die in reverse order.
    engine_ = std::make_shared<mpi_detail::Engine>(comm, options);
  }

  /// A communicator over `sub` (which it duplicates), with these options; `sub` is freed.
  [[nodiscard]] Mpi adopt(MPI_Comm sub) const {
    struct Free {
      MPI_Comm& c;
      ~Free() { MPI_Comm_free(&c); }
    } free_sub{sub};
    return Mpi(sub, options());
  }

  template <class T>
  static mpi_detail::Operation operation(mpi_detail::Op op, std::span<T> b, int root) {
    return mpi_detail::Operation(detail::collective(op, b, root));
  }

  mpi_detail::Operation byte_operation(mpi_detail::Op op, const char* where, std::span<const std::byte> send,
                                       std::span<std::byte> recv) const {
    const std::size_t block = detail::byte_block(op == mpi_detail::Op::all_to_all, where, send, recv, size(), rank());
    if (block > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::invalid_argument(std::string(where) + ": blocks of more than 2^31-1 bytes are not supported (got " +
                                  std::to_string(block) + " bytes per block)");
    return mpi_detail::Operation(detail::byte_collective(op, send, recv, block));
  }

  std::shared_ptr<mpi_detail::Environment> environment_;
  std::shared_ptr<mpi_detail::Engine> engine_;
  int thread_level_ = MPI_THREAD_SINGLE;
};

}  // namespace cocod::comm
