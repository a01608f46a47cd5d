#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/mpi/collectives.hpp is internal: include <cocod/comm/mpi.hpp>"
#endif
// comm::Mpi's collectives on its duplicated communicator, each either blocking or in stages
// that MPI_Test or MPI_Wait advance (whoever drives them: see progress.hpp). The byte
// collectives are MPI_(I)alltoall and MPI_(I)allgather of MPI_BYTE, one stage after the
// exchange of descriptions. With
// MpiOptions::deterministic an all-reduce is a reduce-scatter whose slices are summed in rank
// order, pipelined chunk by chunk with the all-gather (rank_ordered.hpp): the sums of
// comm::Threads, to the bit.
//
// Before its data moves, every collective sends a description of itself (a Header: what, of
// which scalar, how many, from which root) to every peer and receives theirs. Ranks whose
// collectives differ would otherwise pair wrong calls and hang, or corrupt buffers; with every
// description at hand, every rank raises the same DistributedError naming the ranks and what
// they called, as comm::Threads does, before any data moves. A rank whose communicator goes
// away sends a last description that says so, which its peers' next collective sees. Point to
// point messages rather than one MPI collective: a rank then knows whose description has not
// arrived, and a stalled collective (MpiOptions::stall_timeout) can name the ranks it waits for.
#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "cocod/comm/communicator.hpp"
#include "cocod/comm/detail/mpi/environment.hpp"
#include "cocod/comm/detail/mpi/options.hpp"
#include "cocod/comm/detail/mpi/rank_ordered.hpp"
#include "cocod/comm/detail/ticket_ring.hpp"
#include "cocod/errors.hpp"

namespace cocod::comm::mpi_detail {

using comm::detail::Op;

/// One collective, advanced stage by stage so that it can be driven by MPI_Test polls.
struct Operation : comm::detail::Collective {
  Operation() = default;
  explicit Operation(const comm::detail::Collective& c) : comm::detail::Collective(c) {}
  int stage = 0;          // 0: not started
  bool blocking = false;  // its data moves by MPI's blocking collectives (see Collectives::run_blocking)
  Clock::time_point since{};  // when the current stage began: the stall timeout counts from it
  MPI_Request request = MPI_REQUEST_NULL;
};

/// What a rank is about to call, as its peers receive it. code 0: the rank calls no more
/// collectives (its communicator is going away); else 1 + (op, scalar, blocking) in bits. count:
/// elements, or the block size in bytes of a byte collective.
struct Header {
  std::int64_t code = 0, count = 0, root = 0;
};
static_assert(sizeof(Header) == 3 * sizeof(std::int64_t));

[[nodiscard]] inline Header header_of(const Operation& op) noexcept {
  return {1 + ((static_cast<std::int64_t>(op.op) << 2) | (std::int64_t{op.is_double} << 1) | std::int64_t{op.blocking}),
          static_cast<std::int64_t>(op.count), op.root};
}
[[nodiscard]] inline bool operator==(const Header& a, const Header& b) noexcept {
  return a.code == b.code && a.count == b.count && a.root == b.root;
}
/// As comm::Threads describes a collective; `kind`: say whether MPI's blocking or non-blocking
/// calls move its data (the one difference when the ranks' settings or calls differ in that
/// alone: MPI never matches the two kinds).
[[nodiscard]] inline std::string describe(const Header& h, bool kind) {
  if (h.code == 0) return "no more collectives (its communicator went away)";
  const comm::detail::Collective c{static_cast<Op>((h.code - 1) >> 2), (((h.code - 1) >> 1) & 1) != 0, nullptr,
                                   static_cast<std::size_t>(h.count), static_cast<int>(h.root)};
  const bool blocking = ((h.code - 1) & 1) != 0;
  return comm::detail::describe(c) + (!kind ? "" : blocking ? " by MPI's blocking calls" : " by MPI's non-blocking calls");
}

/// "rank 3" or "ranks 0, 1, 2": at most 8 named, then how many more.
[[nodiscard]] inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < 8; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) s += " and " + std::to_string(ranks.size() - 8) + " more";
  return s;
}

[[nodiscard]] inline std::string seconds_text(std::chrono::milliseconds t) {
  if (t.count() % 1000 == 0) return std::to_string(t.count() / 1000) + " s";
  std::string s = std::to_string(static_cast<double>(t.count()) / 1000.0);
  while (s.back() == '0') s.pop_back();
  return s + " s";
}

/// The duplicated communicator and the schedule of the rank-ordered sum. Used by one thread at a
/// time (the progress engine's lock or its communication thread).
class Collectives {
 public:
  Collectives(MPI_Comm comm, const MpiOptions& options)
      : deterministic_(options.deterministic), stall_(options.stall_timeout) {
    check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    headers_.resize(static_cast<std::size_t>(size_));
    exchange_.assign(2 * static_cast<std::size_t>(size_ - 1), MPI_REQUEST_NULL);
  }
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;
  ~Collectives() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] MPI_Comm handle() const noexcept { return comm_; }
  /// A collective stalled: MPI cannot cancel it, so this process cannot finalize MPI cleanly.
  [[nodiscard]] bool stalled() const noexcept { return stalled_; }
  /// Why no collective may run any more (a mismatch or a stall); empty while they may.
  [[nodiscard]] const std::string& failure() const noexcept { return broken_; }

  /// Advances `op` by as many stages as are ready; true when it completed. `block`: wait (in
  /// MPI_Wait, or with a stall timeout in MPI_Test until the deadline) instead of testing once.
  bool advance(Operation& op, bool block) { return op.is_double ? advance<double>(op, block) : advance<float>(op, block); }

  /// Begins `op` (its first stage, the exchange of descriptions) unless it has begun; the next
  /// advance() goes on from there. Throws cocod::Aborted when no collective may run any more.
  void start(Operation& op) {
    if (op.stage != 0) return;
    // After a mismatch or a stall the ranks are out of step: each later collective would pair
    // with another rank's wrong one.
    if (!broken_.empty()) throw Aborted("cocod::comm::Mpi: collective aborted: " + broken_);
    if (left_) throw Aborted("cocod::comm::Mpi: collective after this rank left (its communicator went away)");
    op.since = Clock::now();
    if (size_ == 1) {
      op.stage = 2;
      return;
    }
    start_exchange(header_of(op));
    op.stage = 1;
  }

  /// Runs `op` to completion in the calling thread. Without a stall timeout its data moves by
  /// MPI's blocking collectives, MPI's best-tuned ones, which cannot time out; with one, by the
  /// non-blocking ones tested until the deadline. The rank-ordered sum is the same either way,
  /// so results are bitwise those of the staged path.
  void run_blocking(Operation& op) {
    op.blocking = !stall_on();
    advance(op, true);
  }

  /// This rank calls no more collectives here: tells every peer, whose collective at this point
  /// then fails (unless it leaves as well), and throws the same DistributedError if a peer
  /// called a collective instead. Once only; nothing after a failure (the ranks agree on it).
  void depart() {
    if (left_ || !broken_.empty()) return;
    left_ = true;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (size_ == 1 || finalized) return;
    start_exchange(Header{});
    const auto since = Clock::now();
    wait_all(exchange_, true, since, [&] { stall_in_exchange("its last exchange (its communicator goes away)"); });
    check_headers();
  }

 private:
  [[nodiscard]] bool stall_on() const noexcept { return stall_.count() > 0; }

  // Sends this rank's header to every peer and receives theirs, into headers_.
  void start_exchange(const Header& mine) {
    constexpr int tag = 0x0c0d;
    headers_[static_cast<std::size_t>(rank_)] = mine;
    std::size_t i = 0;
    for (int q = 0; q < size_; ++q)
      if (q != rank_)
        check(MPI_Irecv(&headers_[static_cast<std::size_t>(q)], 3, MPI_INT64_T, q, tag, comm_, &exchange_[i++]),
              "MPI_Irecv");
    for (int q = 0; q < size_; ++q)
      if (q != rank_)
        check(MPI_Isend(&headers_[static_cast<std::size_t>(rank_)], 3, MPI_INT64_T, q, tag, comm_, &exchange_[i++]),
              "MPI_Isend");
  }

  // Whether every request completed: tested once, or with `block` until they have; past the
  // stall timeout since `since`, `stall()` (which throws).
  template <class Stall>
  bool wait_all(std::vector<MPI_Request>& requests, bool block, Clock::time_point since, Stall&& stall) {
    return wait_all(requests.data(), static_cast<int>(requests.size()), block, since, stall);
  }
  template <class Stall>
  bool wait_all(MPI_Request* requests, int n, bool block, Clock::time_point since, Stall&& stall) {
    if (block && !stall_on()) {
      check(MPI_Waitall(n, requests, MPI_STATUSES_IGNORE), "MPI_Waitall");
      return true;
    }
    for (;;) {
      int flag = 0;
      check(MPI_Testall(n, requests, &flag, MPI_STATUSES_IGNORE), "MPI_Testall");
      if (flag) return true;
      if (stall_on() && Clock::now() - since >= stall_) stall();
      if (!block) return false;
    }
  }

  // Every rank holds every header: each finds the same mismatch and throws the same error.
  void check_headers() {
    bool same = true;
    for (const Header& h : headers_) same = same && h == headers_[0];
    if (same) return;
    broken_ = mismatch();
    throw DistributedError("cocod::comm::Mpi: " + broken_);
  }

  [[nodiscard]] std::string mismatch() const {
    struct Group {
      Header header;
      std::vector<int> ranks;
    };
    std::vector<Group> groups;
    for (int q = 0; q < size_; ++q) {
      const Header& h = headers_[static_cast<std::size_t>(q)];
      auto g = groups.begin();
      while (g != groups.end() && !(g->header == h)) ++g;
      if (g == groups.end()) groups.push_back({h, {q}});
      else g->ranks.push_back(q);
    }
    // Differing in the kind of MPI call alone (a setting or a call that differs between ranks)?
    bool kind_only = true;
    for (const Group& g : groups) {
      const Header& a = g.header;
      const Header& b = groups.front().header;
      kind_only = kind_only && a.code != 0 && b.code != 0 && ((a.code - 1) >> 1) == ((b.code - 1) >> 1) &&
                  a.count == b.count && a.root == b.root;
    }
    std::vector<int> gone;
    std::string calls;
    for (const Group& g : groups) {
      if (g.header.code == 0) {
        gone = g.ranks;
        continue;
      }
      calls += (calls.empty() ? "" : " and ") + rank_list(g.ranks) + (g.ranks.size() == 1 ? " calls " : " call ") +
               describe(g.header, kind_only);
    }
    if (!gone.empty())
      return rank_list(gone) + " returned while " + calls + " (the workers called different sequences of collectives)";
    std::string s = "workers called mismatched collectives (";
    for (std::size_t i = 0; i < groups.size(); ++i)
      s += (i ? "; " : "") + rank_list(groups[i].ranks) + ": " + describe(groups[i].header, kind_only);
    return s + ")";
  }

  // The exchange before `what` has not completed in time: the peers whose header has not
  // arrived have not begun it.
  [[noreturn]] void stall_in_exchange(const std::string& what) {
    std::vector<int> missing;
    std::size_t i = 0;
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      int flag = 0;
      MPI_Test(&exchange_[i++], &flag, MPI_STATUS_IGNORE);
      if (!flag) missing.push_back(q);
    }
    std::string m = "no progress ";
    if (!missing.empty()) m += "from " + rank_list(missing) + " ";
    m += "for " + seconds_text(stall_) + ": rank " + std::to_string(rank_) + " waits in " + what;
    if (!missing.empty())
      m += std::string(", which ") + (missing.size() == 1 ? "it has" : "they have") + " not begun";
    stall(m + " (a rank stopped, hangs, or computes far longer than its peers; MpiOptions::stall_timeout)");
  }
  [[noreturn]] void stall_in_data(const Operation& op) {
    stall("no progress for " + seconds_text(stall_) + " in " + comm::detail::describe(op) +
          ", which every rank began (a rank stopped in the middle of it, or the network failed; "
          "MpiOptions::stall_timeout)");
  }
  [[noreturn]] void stall(const std::string& message) {
    stalled_ = true;
    broken_ = message;
    throw Aborted("cocod::comm::Mpi: " + message);
  }

  template <class T>
  bool advance(Operation& op, bool block) {
    const MPI_Datatype type = datatype<T>();
    auto finished = [&]() {
      return wait_all(&op.request, 1, block, op.since, [&] { stall_in_data(op); });
    };
    T* data = static_cast<T*>(op.data);
    for (;;) {
      switch (op.stage) {
        case 0:
          start(op);
          break;
        case 1:
          if (!wait_all(exchange_, block, op.since, [&] { stall_in_exchange(comm::detail::describe(op)); }))
            return false;
          check_headers();
          op.stage = 2;
          break;
        case 2: {
          const int n = checked_count(op.count);
          op.since = Clock::now();
          if (op.blocking) {
            op.stage = 0;
            execute_blocking<T>(op);
            return true;
          }
          if (op.op == Op::all_to_all) {
            check(MPI_Ialltoall(op.send, n, MPI_BYTE, data, n, MPI_BYTE, comm_, &op.request), "MPI_Ialltoall");
          } else if (op.op == Op::all_gather) {
            check(MPI_Iallgather(gather_send(op), n, MPI_BYTE, data, n, MPI_BYTE, comm_, &op.request),
                  "MPI_Iallgather");
          } else if (op.op == Op::broadcast) {
            check(MPI_Ibcast(data, n, type, op.root, comm_, &op.request), "MPI_Ibcast");
          } else if (!rank_ordered()) {
            check(MPI_Iallreduce(MPI_IN_PLACE, data, n, type, MPI_SUM, comm_, &op.request), "MPI_Iallreduce");
          } else {
            rank_ordered_.start(data, op.count, type, comm_, rank_, size_);
          }
          op.stage = 3;
          break;
        }
        default:
          if (op.op == Op::all_reduce && rank_ordered()) {
            if (!rank_ordered_.advance<T>(block, schedule_wait(op))) return false;
          } else if (!finished()) {
            return false;
          }
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
    if (op.op == Op::all_to_all) {
      check(MPI_Alltoall(op.send, n, MPI_BYTE, data, n, MPI_BYTE, comm_), "MPI_Alltoall");
    } else if (op.op == Op::all_gather) {
      check(MPI_Allgather(gather_send(op), n, MPI_BYTE, data, n, MPI_BYTE, comm_), "MPI_Allgather");
    } else if (op.op == Op::broadcast) {
      check(MPI_Bcast(data, n, type, op.root, comm_), "MPI_Bcast");
    } else if (!rank_ordered()) {
      check(MPI_Allreduce(MPI_IN_PLACE, data, n, type, MPI_SUM, comm_), "MPI_Allreduce");
    } else {  // (the same point-to-point schedule: no blocking call of MPI's does it)
      rank_ordered_.start(data, op.count, type, comm_, rank_, size_);
      rank_ordered_.advance<T>(true, schedule_wait(op));
    }
  }
  // How the rank-ordered schedule tests or waits for its messages: a stall is no progress for
  // the stall timeout since the last message that completed.
  auto schedule_wait(Operation& op) {
    return [this, &op](MPI_Request* requests, int n, bool block) {
      if (!wait_all(requests, n, block, op.since, [&] { stall_in_data(op); })) return false;
      op.since = Clock::now();
      return true;
    };
  }

  // One rank has nothing to exchange, so its sum is MPI's whatever the setting.
  [[nodiscard]] bool rank_ordered() const noexcept { return deterministic_ && size_ > 1; }

  static int checked_count(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::invalid_argument("cocod::comm::Mpi: buffers of more than 2^31-1 elements are not supported");
    return static_cast<int>(n);
  }

  // An all-gather whose send is its own block of recv runs in place (MPI forbids the buffers to
  // overlap otherwise).
  [[nodiscard]] const void* gather_send(const Operation& op) const noexcept {
    const auto* own = static_cast<const std::byte*>(op.data) + static_cast<std::size_t>(rank_) * op.count;
    return op.count > 0 && op.send == own ? MPI_IN_PLACE : op.send;
  }

  bool deterministic_;
  std::chrono::milliseconds stall_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  RankOrderedAllReduce rank_ordered_;
  std::vector<Header> headers_;          // every rank's, for the exchange in flight
  std::vector<MPI_Request> exchange_;    // its receives (peers in rank order), then its sends
  std::string broken_;                   // why no collective may run any more: a mismatch or a stall
  bool stalled_ = false;
  bool left_ = false;                    // depart() was called
};

}  // namespace cocod::comm::mpi_detail
