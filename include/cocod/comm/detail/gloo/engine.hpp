#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/gloo/engine.hpp is internal: include <cocod/comm/gloo.hpp>"
#endif
// What every copy of one comm::Gloo shares: the Gloo context over TCP, the store, and a
// communication thread that runs the posted collectives in order. Each collective first
// exchanges descriptions (an all-gather of Headers: mismatched calls raise the same
// DistributedError on every rank), then moves its data. The all-reduce is a padded all-to-all
// of slices, a sum of each slice in rank order, and an all-gather: the sums of comm::Threads
// and comm::Mpi, to the bit. A Gloo context cannot be used after a failure: the first one
// breaks the communicator, and later collectives throw cocod::Aborted with its reason.
#include <gloo/allgather.h>
#include <gloo/alltoall.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "cocod/comm/communicator.hpp"
#include "cocod/comm/detail/collective_queue.hpp"
#include "cocod/comm/detail/descriptions.hpp"
#include "cocod/comm/detail/gloo/abort.hpp"
#include "cocod/comm/detail/gloo/mesh.hpp"
#include "cocod/comm/detail/gloo/options.hpp"
#include "cocod/comm/detail/rank_order.hpp"
#include "cocod/comm/detail/thread_start.hpp"
#include "cocod/comm/detail/ticket_ring.hpp"
#include "cocod/rendezvous/tcp_store.hpp"
#include "cocod/errors.hpp"

namespace cocod::comm::gloo_detail {

using comm::detail::Collective;
using comm::detail::Header;
using comm::detail::Op;

/// The store key where a failing rank leaves its error for its peers.
[[nodiscard]] inline std::string failure_key(const GlooOptions& o) { return o.prefix + "/failed"; }

/// Gloo writes to its sockets without MSG_NOSIGNAL: a write to a peer that is gone would end the
/// process with SIGPIPE instead of failing the collective. Ignored, unless the program set its
/// own handler.
inline void ignore_sigpipe() noexcept {
  struct sigaction old {};
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);
}

class Engine {
  using Queue = comm::detail::CollectiveQueue<Collective>;

 public:
  Engine(const GlooOptions& options, std::shared_ptr<rendezvous::TcpStore> store, std::shared_ptr<GlooAbort> abort)
      : options_(options),
        store_(std::move(store)),
        abort_(abort ? std::move(abort) : std::make_shared<GlooAbort>()),
        headers_(static_cast<std::size_t>(options.size)) {
    ignore_sigpipe();
    context_ = connect_mesh(options_, *store_, *abort_);
    try {
      thread_ = std::thread([this] { queue_.serve([this](Collective& c) { execute(c); }); });
    } catch (...) {
      comm::detail::rethrow_start_failure("cocod::comm::Gloo: the communication thread could not be started");
    }
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine() {
    queue_.close();
    if (thread_.joinable()) thread_.join();
  }

  [[nodiscard]] int rank() const noexcept { return options_.rank; }
  [[nodiscard]] int size() const noexcept { return options_.size; }
  [[nodiscard]] const GlooOptions& options() const noexcept { return options_; }
  [[nodiscard]] rendezvous::TcpStore& store() noexcept { return *store_; }

  std::uint64_t post(const Collective& c) { return queue_.post(c, "cocod::comm::Gloo"); }
  Clock::time_point wait(std::uint64_t ticket) { return queue_.wait(ticket); }
  bool ready(std::uint64_t ticket) noexcept { return queue_.ready(ticket); }
  void run(const Collective& c) { wait(post(c)); }

  /// Every later collective fails at once (cocod::PeerLost); the peers' fail once this engine is
  /// destroyed (its connections close). From any thread. A collective already waiting for a
  /// peer is not woken (Gloo cannot cancel one): it ends when the peer's connection closes, or
  /// at the stall timeout.
  void abort() noexcept { abort_->abort(); }

  /// This rank calls no more collectives: a last exchange of descriptions once the posted ones
  /// completed; a peer that calls a collective instead raises DistributedError (here too).
  void depart() {
    queue_.drain();
    if (!broken_.empty() || size() == 1) return;
    const Collective last{};
    const auto since = Clock::now();
    try {
      exchange(Header{});
    } catch (const ::gloo::Exception& e) {
      fail(last, since, e.what());
    }
  }

 private:
  // Runs one collective on the communication thread.
  void execute(const Collective& c) {
    if (abort_->aborted() && broken_.empty()) {
      broken_ = "rank " + std::to_string(rank()) + ": its group was ended (abort)";
      lost_peer_ = true;
    }
    if (!broken_.empty()) {
      const std::string what = "cocod::comm::Gloo: collective aborted: " + broken_;
      if (lost_peer_) throw PeerLost(what);  // still the lost peer, whichever collective sees it first
      throw Aborted(what);
    }
    if (size() == 1) return local(c);
    const auto since = Clock::now();
    try {
      exchange(comm::detail::header_of(c, false));
      move_data(c);
    } catch (const ::gloo::Exception& e) {
      fail(c, since, e.what());
    }
  }

  // The collective among one worker: only a byte collective moves anything (its own block).
  static void local(const Collective& c) {
    if (comm::detail::moves_bytes(c.op) && c.send != c.data && c.count > 0) std::memmove(c.data, c.send, c.count);
  }

  void exchange(const Header& mine) {
    headers_[static_cast<std::size_t>(rank())] = mine;
    ::gloo::AllgatherOptions o(context_);
    o.setOutput(reinterpret_cast<char*>(headers_.data()), headers_.size() * sizeof(Header));
    o.setTimeout(options_.stall_timeout);
    ::gloo::allgather(o);
    const std::string mismatch = comm::detail::mismatch(headers_);
    if (mismatch.empty()) return;
    broken_ = mismatch;
    throw DistributedError("cocod::comm::Gloo: " + mismatch);
  }

  void move_data(const Collective& c) {
    if (c.count == 0) return;
    switch (c.op) {
      case Op::all_reduce:
        return c.is_double ? all_reduce(static_cast<double*>(c.data), c.count)
                           : all_reduce(static_cast<float*>(c.data), c.count);
      case Op::broadcast:
      case Op::broadcast_bytes: {
        ::gloo::BroadcastOptions o(context_);
        o.setOutput(static_cast<char*>(c.data), c.count * comm::detail::element_size(c));
        o.setRoot(c.root);
        o.setTimeout(options_.stall_timeout);
        return ::gloo::broadcast(o);
      }
      case Op::all_to_all: {
        ::gloo::AlltoallOptions o(context_);
        o.setInput(const_cast<char*>(static_cast<const char*>(c.send)), c.count * size_bytes());
        o.setOutput(static_cast<char*>(c.data), c.count * size_bytes());
        o.setTimeout(options_.stall_timeout);
        return ::gloo::alltoall(o);
      }
      case Op::all_gather: {
        ::gloo::AllgatherOptions o(context_);
        auto* out = static_cast<char*>(c.data);
        if (c.send != out + static_cast<std::size_t>(rank()) * c.count)
          o.setInput(const_cast<char*>(static_cast<const char*>(c.send)), c.count);
        o.setOutput(out, c.count * size_bytes());
        o.setTimeout(options_.stall_timeout);
        return ::gloo::allgather(o);
      }
    }
  }

  [[nodiscard]] std::size_t size_bytes() const noexcept { return static_cast<std::size_t>(size()); }

  // Slice q of every rank goes to rank q (padded to the longest slice), which sums them in rank
  // order; then every rank gathers the sums.
  template <class T>
  void all_reduce(T* data, std::size_t n) {
    const auto workers = static_cast<std::size_t>(size());
    const std::size_t block = (n + workers - 1) / workers;
    const std::size_t bytes = workers * block * sizeof(T);
    if (send_.size() < bytes) send_.resize(bytes);
    if (recv_.size() < bytes) recv_.resize(bytes);
    T* send = reinterpret_cast<T*>(send_.data());
    T* recv = reinterpret_cast<T*>(recv_.data());
    for (std::size_t q = 0; q < workers; ++q) {
      const auto [b, e] = comm::detail::slice(q, n, workers);
      std::copy(data + b, data + e, send + q * block);
    }
    ::gloo::AlltoallOptions a(context_);
    a.setInput(send, workers * block);
    a.setOutput(recv, workers * block);
    a.setTimeout(options_.stall_timeout);
    ::gloo::alltoall(a);
    const auto r = static_cast<std::size_t>(rank());
    const auto [mine_b, mine_e] = comm::detail::slice(r, n, workers);
    comm::detail::sum_in_rank_order(send + r * block, mine_e - mine_b, workers,
                                    [&](std::size_t q) { return recv + q * block; });
    ::gloo::AllgatherOptions g(context_);
    g.setOutput(send, workers * block);
    g.setTimeout(options_.stall_timeout);
    ::gloo::allgather(g);
    for (std::size_t q = 0; q < workers; ++q) {
      const auto [b, e] = comm::detail::slice(q, n, workers);
      std::copy(send + q * block, send + q * block + (e - b), data + b);
    }
  }

  // A Gloo call failed: the peer is gone (its connection closed), or the stall timeout passed.
  // Breaks the communicator (a Gloo context is not usable after a failure) and throws what the
  // worker should see: a peer's own error when it left one in the store, else what happened.
  [[noreturn]] void fail(const Collective& c, Clock::time_point since, const std::string& gloo_reason) {
    abort();  // this context is done: nothing may wait on it any more
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since);
    const std::string what = comm::detail::describe(c);
    if (waited >= options_.stall_timeout) {
      broken_ = "rank " + std::to_string(rank()) + ": " + what + " made no progress for " +
                std::to_string(waited.count()) + " ms (stall_timeout " + std::to_string(options_.stall_timeout.count()) +
                " ms): a peer stopped, hangs, or computes far longer than the others";
      throw Aborted("cocod::comm::Gloo: " + broken_);
    }
    // A failing peer writes its error before its process ends and its connections close.
    std::string peer_error;
    try {
      if (auto v = store_->try_get(failure_key(options_))) peer_error.assign(v->begin(), v->end());
    } catch (const CommunicationError&) {  // the store is gone too: report what Gloo saw
    }
    if (!peer_error.empty()) {
      broken_ = peer_error;
      throw Aborted("cocod::comm::Gloo: " + peer_error);
    }
    broken_ = "rank " + std::to_string(rank()) + " lost a peer during " + what + " (" + gloo_reason + ")";
    lost_peer_ = true;
    throw PeerLost("cocod::comm::Gloo: " + broken_);
  }

  GlooOptions options_;
  std::shared_ptr<rendezvous::TcpStore> store_;
  std::shared_ptr<GlooAbort> abort_;  // ends it from any thread (abort())
  std::shared_ptr<::gloo::Context> context_;
  std::vector<Header> headers_;
  std::vector<char> send_, recv_;  // the all-reduce's staging; the communication thread's alone
  std::string broken_;             // why no collective may run any more; the communication thread's
  bool lost_peer_ = false;         // ... because a peer was lost
  Queue queue_;
  std::thread thread_;
};

}  // namespace cocod::comm::gloo_detail
