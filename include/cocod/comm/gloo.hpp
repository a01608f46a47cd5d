#pragma once
// Workers as processes that find each other through a rendezvous store and talk over TCP
// (Gloo, the collective library of PyTorch's CPU backend): training across machines with no MPI
// launcher. Link the CMake target cocod::gloo (Debian: libgloo-dev).
//
// For a fixed set of workers it is a communicator like comm::Mpi: collectives run in posting
// order on a communication thread, all-reduce sums are taken in rank order (bitwise those of
// comm::Threads and comm::Mpi with as many workers), the byte collectives serve compression,
// every collective is preceded by an exchange of descriptions (mismatched calls raise the same
// DistributedError on every rank), and GlooOptions::stall_timeout ends a collective that waits
// too long with cocod::Aborted. Unlike MPI, a lost peer does not end the survivors' processes:
// their collective throws cocod::PeerLost (or, when the peer failed in Gloo::run, cocod::Aborted
// with the peer's own error), and the survivors may go on in a new communicator. (So that a
// write to a lost peer fails instead of ending the process, comm::Gloo ignores SIGPIPE unless
// the program set a handler of its own.)
#include <chrono>
#include <cstdio>
#include <memory>
#include <span>
#include <thread>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/backend/device_span.hpp"
#include "cocod/backend/scalar.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/rendezvous/store_server.hpp"
#include "cocod/rendezvous/tcp_store.hpp"
#include "cocod/errors.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/comm/detail/byte_blocks.hpp"
#include "cocod/comm/detail/gloo/engine.hpp"
#include "cocod/comm/detail/gloo/options.hpp"
#include "cocod/comm/detail/host_staging.hpp"
#include "cocod/comm/detail/ticket_ring.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::comm {

/// The communicator of one worker process. A cheap handle: copies share the connections.
///
///     // on every machine: ./train --rank R --workers N --store node0:29500
///     cocod::comm::GlooOptions o{.store = "node0:29500", .rank = R, .size = N, .serve_store = R == 0};
///     return cocod::comm::Gloo::run(o, [&](cocod::comm::Gloo comm) {
///       cocod::Optimizer<MyModel, cocod::comm::Gloo> opt{comm, options};
///       opt.optimize(model, cocod::Epochs{5});
///     });
class Gloo : public detail::StagedDeviceCollectives<Gloo> {
 public:
  using Request = detail::TicketRequest<gloo_detail::Engine>;

  /// Connects to the store (serving it first when options.serve_store and rank 0) and to every
  /// peer. Throws std::invalid_argument naming a bad field, cocod::CommunicationError when the
  /// store or the peers cannot be reached within options.connect_timeout.
  explicit Gloo(const GlooOptions& options) {
    const GlooOptions o = gloo_detail::checked(options);
    const auto address = rendezvous::tcp::parse_address(o.store, "cocod::comm::GlooOptions: store");
    if (o.serve_store && o.rank == 0) server_ = std::make_shared<rendezvous::StoreServer>("", address.port, rendezvous::StoreOptions{.token = o.token});
    engine_ = std::make_shared<gloo_detail::Engine>(o, std::make_shared<rendezvous::TcpStore>(o.store, o.connect_timeout, o.token), nullptr);
  }
  /// The same over a connection to the store that the caller already holds (an elastic worker's,
  /// one per process rather than one per communicator); options.store and serve_store are not used.
  /// `abort`, when given, ends it from another thread, the connection set-up included (which
  /// then throws cocod::Aborted).
  Gloo(const GlooOptions& options, std::shared_ptr<rendezvous::TcpStore> store, std::shared_ptr<GlooAbort> abort = nullptr) {
    GlooOptions o = options;
    o.store = store ? store->address() : std::string();
    o.serve_store = false;
    engine_ = std::make_shared<gloo_detail::Engine>(gloo_detail::checked(o), std::move(store), std::move(abort));
  }

  /// Runs fn(Gloo) and returns fn's result if it is an int (the exit status for main), else 0.
  /// If fn throws (or the communicator cannot be set up), leaves "rank R failed: <what>" in the
  /// store for the peers, whose collectives then fail with that same message instead of a lost
  /// connection, prints "cocod: rank R failed: <what>" to stderr and returns 1. When fn returned
  /// while peers still call collectives, every rank raises the same DistributedError.
  template <class F>
    requires std::is_invocable_v<F&, Gloo>
  static int run(const GlooOptions& options, F&& fn) {
    std::shared_ptr<gloo_detail::Engine> engine;
    std::shared_ptr<rendezvous::StoreServer> server;
    // A failure: the peers read its message from the store when their collectives fail, which
    // they do once this rank's connections close (now, not at the stall timeout); a store served
    // here stays up a moment longer for them to read it.
    const auto failed = [&](const std::string& what) {
      report_failure(engine.get(), options.rank, what);
      engine.reset();  // its connections close: the peers' collectives fail now
      if (server) std::this_thread::sleep_for(std::chrono::seconds(1));
    };
    try {
      Gloo comm(options);
      engine = comm.engine_;
      server = comm.server_;
      int status = 0;
      if constexpr (std::is_same_v<std::invoke_result_t<F&, Gloo>, int>)
        status = fn(comm);
      else
        fn(comm);
      engine->depart();
      return status;
    } catch (const std::exception& e) {
      failed(e.what());
    } catch (...) {
      failed("unknown exception");
    }
    return 1;
  }

  [[nodiscard]] int rank() const noexcept { return engine_->rank(); }
  [[nodiscard]] int size() const noexcept { return engine_->size(); }
  [[nodiscard]] const GlooOptions& options() const noexcept { return engine_->options(); }
  /// The rendezvous store this worker uses (shared with the communication thread).
  [[nodiscard]] rendezvous::TcpStore& store() noexcept { return engine_->store(); }

  template <Scalar T>
  void broadcast(std::span<T> buffer, int root) {
    detail::check_root("cocod::comm::Gloo::broadcast", root, size());
    engine_->run(detail::collective(detail::Op::broadcast, buffer, root));
  }
  /// The bytes of root's buffer, to every worker (equal sizes).
  void broadcast(std::span<std::byte> buffer, int root) {
    detail::check_root("cocod::comm::Gloo::broadcast", root, size());
    engine_->run(detail::byte_broadcast(buffer, root));
  }
  template <Scalar T>
  void all_reduce(std::span<T> buffer) {
    engine_->run(detail::collective(detail::Op::all_reduce, buffer, 0));
  }
  template <Scalar T>
  [[nodiscard]] Request all_reduce_async(std::span<T> buffer) {
    return Request(engine_.get(), engine_->post(detail::collective(detail::Op::all_reduce, buffer, 0)));
  }
  /// The byte collectives (see comm::ByteCollectives): bad sizes throw std::invalid_argument.
  void all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) {
    engine_->run(bytes(detail::Op::all_to_all, "cocod::comm::Gloo::all_to_all", send, recv));
  }
  [[nodiscard]] Request all_to_all_async(std::span<const std::byte> send, std::span<std::byte> recv) {
    return Request(engine_.get(), engine_->post(bytes(detail::Op::all_to_all, "cocod::comm::Gloo::all_to_all_async", send, recv)));
  }
  void all_gather(std::span<const std::byte> send, std::span<std::byte> recv) {
    engine_->run(bytes(detail::Op::all_gather, "cocod::comm::Gloo::all_gather", send, recv));
  }
  [[nodiscard]] Request all_gather_async(std::span<const std::byte> send, std::span<std::byte> recv) {
    return Request(engine_.get(), engine_->post(bytes(detail::Op::all_gather, "cocod::comm::Gloo::all_gather_async", send, recv)));
  }

  /// From any thread: every later collective fails at once with cocod::PeerLost (one already
  /// waiting for a peer ends when that peer's connection closes, or at the stall timeout: Gloo
  /// cannot cancel it); the peers' fail once this communicator is destroyed. For a worker told
  /// from elsewhere that its group is gone (an elastic run's coordinator formed the next epoch).
  void abort() noexcept { engine_->abort(); }

  /// Device buffers (needs <cocod/backend/cuda.hpp>): staged through host memory.
  using StagedDeviceCollectives::all_reduce;
  using StagedDeviceCollectives::all_reduce_async;
  using StagedDeviceCollectives::broadcast;

 private:
  [[nodiscard]] detail::Collective bytes(detail::Op op, const char* where, std::span<const std::byte> send,
                                         std::span<std::byte> recv) const {
    const std::size_t block = detail::byte_block(op == detail::Op::all_to_all, where, send, recv, size(), rank());
    return detail::byte_collective(op, send, recv, block);
  }

  static void report_failure(gloo_detail::Engine* engine, int rank, const std::string& what) {
    const std::string line = "rank " + std::to_string(rank) + " failed: " + what;
    if (engine) {
      try {  // the first failure's message stays: a peer's Aborted echoes it and must not replace it
        if (!engine->store().try_get(gloo_detail::failure_key(engine->options())))
          engine->store().set(gloo_detail::failure_key(engine->options()), std::vector<char>(line.begin(), line.end()));
      } catch (const std::exception&) {  // the store is gone: the peers see the lost connection
      }
    }
    std::fprintf(stderr, "cocod: %s\n", line.c_str());
    std::fflush(stderr);
  }

  std::shared_ptr<rendezvous::StoreServer> server_;  // rank 0 with serve_store; declared first, destroyed last
  std::shared_ptr<gloo_detail::Engine> engine_;
};

}  // namespace cocod::comm
