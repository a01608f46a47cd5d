#pragma once
// Groups of ranks as the workers of an algorithm: the ranks of one group (the GPUs of a node, the
// processes of a machine) hold the same model, and a collective over the groups is sharded over
// each group's members, so that every slow link carries 1/G of it, in parallel.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cocod/backend/scalar.hpp"
#include "cocod/comm/communicator.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/detail/partition.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::comm {

/// The communicator of one rank among G members of each of N groups, whose workers are the
/// groups: rank() is this rank's group and size() = N. `inner` joins the G members of this
/// rank's group (rank = its member index m), over the fast link; `outer` joins member m of every
/// group (rank = the group), over the slow one. Every member of a group must call the same
/// collectives on the same values (an algorithm whose model is a cocod::GroupModel does).
///
///  - all_reduce(buffer): member m sums its slice m of G over the groups through `outer`, then
///    the members gather their slices through `inner`; the sums are outer's, in its order.
///  - broadcast(buffer, root): member 0's buffer inside each group, then group root's: member m
///    moves slice m over `outer`, and the members gather.
///  - all_to_all, all_gather (bytes): member m moves its share of every block through `outer`, then
///    the members gather their shares through `inner` (which needs byte collectives).
///  - the requests of the non-blocking collectives complete the outer part in the background and
///    gather when waited for; ready() is true only after wait(), so that every member gathers at
///    the same point of its run.
///
/// Inner and Outer are host communicators (comm::Threads, comm::Mpi, comm::Throttled of one);
/// buffers are host memory.
template <class Inner, class Outer = Inner>
  requires ByteCollectives<Inner> && ByteCollectives<Outer>
class Grouped {
 public:
  class Request {
   public:
    Request() = default;
    /// Waits for the outer part, then gathers the members' parts (a collective over `inner`).
    void wait() {
      if (done_) return;
      outer_.wait();
      // the exchange's time is the slow link's: the outer part's completion, not the gather's
      if constexpr (requires { outer_.completed_at(); }) completed_ = outer_.completed_at();
      else completed_ = Clock::now();
      if (gather_) gather_();
      gather_ = nullptr;
      done_ = true;
    }
    /// After a failure: waits for the outer part only (the buffers are no longer written), without
    /// the gather, which the other members may never join.
    void abandon() {
      if (done_) return;
      done_ = true;
      gather_ = nullptr;
      outer_.wait();
    }
    [[nodiscard]] Clock::time_point completed_at() const { return completed_; }
    [[nodiscard]] bool ready() const noexcept { return done_; }

   private:
    friend class Grouped;
    typename Outer::Request outer_{};
    std::function<void()> gather_;
    bool done_ = false;
    Clock::time_point completed_{};
  };

  Grouped(Inner inner, Outer outer) : inner_(std::move(inner)), outer_(std::move(outer)) {}

  [[nodiscard]] int rank() const noexcept { return outer_.rank(); }
  [[nodiscard]] int size() const noexcept { return outer_.size(); }
  /// This rank's index in its group, and the group's size G.
  [[nodiscard]] int member() const noexcept { return inner_.rank(); }
  [[nodiscard]] int members() const noexcept { return inner_.size(); }
  [[nodiscard]] Inner& inner() noexcept { return inner_; }
  [[nodiscard]] Outer& outer() noexcept { return outer_; }

  /// Moves the outer collectives on, for an outer communicator driven by its caller
  /// (comm::Mpi with MpiProgress::caller).
  void progress()
    requires requires(Outer& o) { o.progress(); }
  {
    outer_.progress();
  }

  template <class T>
    requires Scalar<T> || std::same_as<T, std::byte>
  void broadcast(std::span<T> buffer, int root) {
    inner_.broadcast(buffer, 0);
    const auto [lo, hi] = share(buffer.size());
    outer_.broadcast(buffer.subspan(lo, hi - lo), root);
    gather_shares(inner_, *scratch_, std::as_writable_bytes(buffer), sizeof(T), 1);
  }
  template <Scalar T>
  void all_reduce(std::span<T> buffer) {
    all_reduce_async(buffer).wait();
  }
  template <Scalar T>
  [[nodiscard]] Request all_reduce_async(std::span<T> buffer) {
    const auto [lo, hi] = share(buffer.size());
    Request r;
    r.outer_ = outer_.all_reduce_async(buffer.subspan(lo, hi - lo));
    r.gather_ = [inner = inner_, scratch = scratch_, buffer]() mutable {
      gather_shares(inner, *scratch, std::as_writable_bytes(buffer), sizeof(T), 1);
    };
    return r;
  }

  void all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) { all_to_all_async(send, recv).wait(); }
  void all_gather(std::span<const std::byte> send, std::span<std::byte> recv) { all_gather_async(send, recv).wait(); }

  /// Block j of `send` (N blocks of b bytes) goes to group j; member m moves bytes [lo_m, hi_m)
  /// of every block, then the members gather.
  [[nodiscard]] Request all_to_all_async(std::span<const std::byte> send, std::span<std::byte> recv) {
    const auto N = static_cast<std::size_t>(size());
    if (send.size() != recv.size() || send.size() % N != 0)
      throw std::invalid_argument("cocod::comm::Grouped::all_to_all: send and recv must have the same size, " +
                                  std::to_string(N) + " blocks of equal size (got send " + std::to_string(send.size()) +
                                  " bytes, recv " + std::to_string(recv.size()) + " bytes)");
    return byte_collective(send, recv, send.size() / N, N, true);
  }
  /// `send` (b bytes) lands in block rank() of every group's `recv` (N blocks).
  [[nodiscard]] Request all_gather_async(std::span<const std::byte> send, std::span<std::byte> recv) {
    const auto N = static_cast<std::size_t>(size());
    if (recv.size() != N * send.size())
      throw std::invalid_argument("cocod::comm::Grouped::all_gather: recv must hold " + std::to_string(N) +
                                  " blocks of send's size (got send " + std::to_string(send.size()) + " bytes, recv " +
                                  std::to_string(recv.size()) + " bytes)");
    return byte_collective(send, recv, send.size(), 1, false);
  }

 private:
  /// This member's share [lo, hi) of n elements.
  [[nodiscard]] std::pair<std::size_t, std::size_t> share(std::size_t n) const noexcept {
    return cocod::detail::part(static_cast<std::size_t>(member()), n, static_cast<std::size_t>(members()));
  }

  /// `data` holds `blocks` blocks of equal size whose elements are `unit` bytes wide, and member
  /// q holds the true value of its share of each block: every member gets every share, through
  /// one all-gather of equal pieces over `inner`, staged in `all` (kept from one call to the next).
  static void gather_shares(Inner& inner, std::vector<std::byte>& all, std::span<std::byte> data, std::size_t unit,
                            std::size_t blocks) {
    const auto G = static_cast<std::size_t>(inner.size()), m = static_cast<std::size_t>(inner.rank());
    if (G == 1) return;
    const std::size_t stride = data.size() / blocks, elements = stride / unit;
    const std::size_t piece = (elements + G - 1) / G * unit * blocks;  // the largest share, padded
    if (all.size() < piece * G) all.resize(piece * G);
    auto each_share = [&](std::size_t q, auto&& f) {
      const auto [lo, hi] = cocod::detail::part(q, elements, G);
      for (std::size_t j = 0; j < blocks; ++j)
        f(data.data() + j * stride + lo * unit, all.data() + q * piece + j * (hi - lo) * unit, (hi - lo) * unit);
    };
    each_share(m, [](std::byte* from, std::byte* to, std::size_t n) { if (n) std::memcpy(to, from, n); });
    inner.all_gather(std::span<const std::byte>(all.data() + m * piece, piece), std::span<std::byte>(all.data(), piece * G));
    for (std::size_t q = 0; q < G; ++q)
      if (q != m) each_share(q, [](std::byte* to, std::byte* from, std::size_t n) { if (n) std::memcpy(to, from, n); });
  }

  /// The byte collectives: member m's share of each of the `send_blocks` blocks of b bytes
  /// through `outer` (all_to_all when `personal`), then the gather of the shares over `inner`.
  Request byte_collective(std::span<const std::byte> send, std::span<std::byte> recv, std::size_t b, std::size_t send_blocks,
                          bool personal) {
    const auto N = static_cast<std::size_t>(size());
    const auto range = share(b);  // (not a structured binding: the lambda below captures it)
    const std::size_t lo = range.first, s = range.second - range.first;
    auto staging = std::make_shared<std::vector<std::byte>>(s * (send_blocks + N));
    std::byte* mine = staging->data();
    for (std::size_t j = 0; j < send_blocks; ++j)
      if (s) std::memcpy(mine + j * s, send.data() + j * b + lo, s);
    const std::span<const std::byte> out(mine, s * send_blocks);
    const std::span<std::byte> in(mine + s * send_blocks, s * N);
    Request r;
    r.outer_ = personal ? outer_.all_to_all_async(out, in) : outer_.all_gather_async(out, in);
    r.gather_ = [inner = inner_, scratch = scratch_, staging, recv, in, b, N, lo, s]() mutable {
      for (std::size_t q = 0; q < N; ++q)
        if (s) std::memcpy(recv.data() + q * b + lo, in.data() + q * s, s);
      gather_shares(inner, *scratch, recv, 1, N);
    };
    return r;
  }

  Inner inner_;
  Outer outer_;
  // the gathers' staging, shared by the copies of this communicator: a gather runs in the thread
  // that waits for its request, one at a time
  std::shared_ptr<std::vector<std::byte>> scratch_ = std::make_shared<std::vector<std::byte>>();
};

}  // namespace cocod::comm
