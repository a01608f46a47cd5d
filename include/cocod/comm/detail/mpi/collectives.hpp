#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/mpi/collectives.hpp is internal: include <cocod/comm/mpi.hpp>"
#endif
// comm::Mpi's collectives on its duplicated communicator, as a machine of stages that MPI_Test
// or MPI_Wait advance (whoever drives them: see progress.hpp): first the exchange of
// descriptions (handshake.hpp), then the data, each stage under the stall timer (stall.hpp).
// The byte collectives are MPI_(I)alltoall and MPI_(I)allgather of MPI_BYTE. With
// MpiOptions::deterministic an all-reduce is a reduce-scatter whose slices are summed in rank
// order, pipelined chunk by chunk with the all-gather (rank_ordered.hpp): the sums of
// comm::Threads, to the bit.
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
#include "cocod/comm/detail/mpi/handshake.hpp"
#include "cocod/comm/detail/mpi/options.hpp"
#include "cocod/comm/detail/mpi/rank_ordered.hpp"
#include "cocod/comm/detail/mpi/stall.hpp"
#include "cocod/comm/detail/ticket_ring.hpp"
#include "cocod/errors.hpp"

namespace cocod::comm::mpi_detail {

// The calls on a communicator that Collectives makes once, when it is built.
inline MPI_Comm duplicate(MPI_Comm comm) {
  MPI_Comm dup = MPI_COMM_NULL;
  check(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup");
  return dup;
}
inline int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}
inline int size_of(MPI_Comm comm) {
  int n = 1;
  MPI_Comm_size(comm, &n);
  return n;
}
// MPI counts elements in an int.
inline int checked_count(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::invalid_argument("cocod::comm::Mpi: buffers of more than 2^31-1 elements are not supported");
  return static_cast<int>(n);
}

/// One collective, advanced stage by stage so that it can be driven by MPI_Test polls.
struct Operation : comm::detail::Collective {
  Operation() = default;
  explicit Operation(const comm::detail::Collective& c) : comm::detail::Collective(c) {}
  int stage = 0;          // 0: not started
  bool blocking = false;  // its data moves by MPI's blocking collectives (see Collectives::run_blocking)
  Clock::time_point since{};  // when the current stage began: the stall timeout counts from it
  MPI_Request request = MPI_REQUEST_NULL;
};

/// The duplicated communicator and the schedule of the rank-ordered sum. Used by one thread at a
/// time (the progress engine's lock or its communication thread).
class Collectives {
 public:
  Collectives(MPI_Comm comm, const MpiOptions& options)
      : deterministic_(options.deterministic),
        comm_(duplicate(comm)),
        rank_(rank_of(comm_)),
        size_(size_of(comm_)),
        stall_(options.stall_timeout, options.stall_suspected, rank_),
        handshake_(comm_, rank_, size_) {}
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
    handshake_.start(header_of(op, op.blocking));
    op.stage = 1;
  }

  /// Runs `op` to completion in the calling thread. Without a stall timeout its data moves by
  /// MPI's blocking collectives, MPI's best-tuned ones, which cannot time out; with one, by the
  /// non-blocking ones tested until the deadline. The rank-ordered sum is the same either way,
  /// so results are bitwise those of the staged path.
  void run_blocking(Operation& op) {
    op.blocking = !stall_.on();
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
    handshake_.start(Header{});
    const auto since = Clock::now();
    stall_.wait_all(handshake_.requests(), handshake_.count(), true, since,
                    [&] { stall_in_exchange("its last exchange (its communicator goes away)"); });
    check_headers();
  }

 private:
  // Every rank holds every header: each finds the same mismatch and throws the same error.
  void check_headers() {
    const std::string mismatch = handshake_.mismatch();
    if (mismatch.empty()) return;
    broken_ = mismatch;
    throw DistributedError("cocod::comm::Mpi: " + broken_);
  }

  // The exchange before `what` has not completed in time: the peers whose header has not
  // arrived have not begun it.
  [[noreturn]] void stall_in_exchange(const std::string& what) {
    const std::vector<int> missing = handshake_.missing();
    std::string m = "no progress ";
    if (!missing.empty()) m += "from " + rank_list(missing) + " ";
    m += "for " + seconds_text(stall_.timeout()) + ": rank " + std::to_string(rank_) + " waits in " + what;
    if (!missing.empty())
      m += std::string(", which ") + (missing.size() == 1 ? "it has" : "they have") + " not begun";
    stall(m + " (a rank stopped, hangs, or computes far longer than its peers; MpiOptions::stall_timeout)");
  }
  [[noreturn]] void stall_in_data(const Operation& op) {
    stall("no progress for " + seconds_text(stall_.timeout()) + " in " + comm::detail::describe(op) +
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
    auto finished = [&]() {
      return stall_.wait_all(&op.request, 1, block, op.since, [&] { stall_in_data(op); });
    };
    for (;;) {
      switch (op.stage) {
        case 0:
          start(op);
          break;
        case 1:
          if (!stall_.wait_all(handshake_.requests(), handshake_.count(), block, op.since,
                               [&] { stall_in_exchange(comm::detail::describe(op)); }))
            return false;
          check_headers();
          op.stage = 2;
          break;
        case 2:
          op.since = Clock::now();
          if (op.blocking) {
            op.stage = 0;
            move_data<T>(op);
            return true;
          }
          move_data<T>(op);
          op.stage = 3;
          break;
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

  // Moves op's data: by MPI's blocking collectives when op.blocking (done on return), otherwise
  // by the non-blocking ones, which advance() then tests or waits for. The same calls either way.
  template <class T>
  void move_data(Operation& op) {
    const bool b = op.blocking;
    const MPI_Datatype type = datatype<T>();
    T* data = static_cast<T*>(op.data);
    const int n = checked_count(op.count);
    MPI_Request* r = &op.request;
    switch (op.op) {
      case Op::all_to_all:
        check(b ? MPI_Alltoall(op.send, n, MPI_BYTE, data, n, MPI_BYTE, comm_)
                : MPI_Ialltoall(op.send, n, MPI_BYTE, data, n, MPI_BYTE, comm_, r),
              b ? "MPI_Alltoall" : "MPI_Ialltoall");
        return;
      case Op::all_gather:
        check(b ? MPI_Allgather(gather_send(op), n, MPI_BYTE, data, n, MPI_BYTE, comm_)
                : MPI_Iallgather(gather_send(op), n, MPI_BYTE, data, n, MPI_BYTE, comm_, r),
              b ? "MPI_Allgather" : "MPI_Iallgather");
        return;
      case Op::broadcast:
        check(b ? MPI_Bcast(data, n, type, op.root, comm_) : MPI_Ibcast(data, n, type, op.root, comm_, r),
              b ? "MPI_Bcast" : "MPI_Ibcast");
        return;
      case Op::broadcast_bytes:
        check(b ? MPI_Bcast(op.data, n, MPI_BYTE, op.root, comm_) : MPI_Ibcast(op.data, n, MPI_BYTE, op.root, comm_, r),
              b ? "MPI_Bcast" : "MPI_Ibcast");
        return;
      case Op::all_reduce:
        break;
    }
    if (!rank_ordered()) {
      check(b ? MPI_Allreduce(MPI_IN_PLACE, data, n, type, MPI_SUM, comm_)
              : MPI_Iallreduce(MPI_IN_PLACE, data, n, type, MPI_SUM, comm_, r),
            b ? "MPI_Allreduce" : "MPI_Iallreduce");
      return;
    }
    // The same point-to-point schedule either way (no blocking call of MPI's does it).
    rank_ordered_.start(data, op.count, type, comm_, rank_, size_);
    if (b) rank_ordered_.advance<T>(true, schedule_wait(op));
  }
  // How the rank-ordered schedule tests or waits for its messages: a stall is no progress for
  // the stall timeout since the last message that completed.
  auto schedule_wait(Operation& op) {
    return [this, &op](MPI_Request* requests, int n, bool block) {
      if (!stall_.wait_all(requests, n, block, op.since, [&] { stall_in_data(op); })) return false;
      op.since = Clock::now();
      return true;
    };
  }

  // One rank has nothing to exchange, so its sum is MPI's whatever the setting.
  [[nodiscard]] bool rank_ordered() const noexcept { return deterministic_ && size_ > 1; }

  // An all-gather whose send is its own block of recv runs in place (MPI forbids the buffers to
  // overlap otherwise).
  [[nodiscard]] const void* gather_send(const Operation& op) const noexcept {
    const auto* own = static_cast<const std::byte*>(op.data) + static_cast<std::size_t>(rank_) * op.count;
    return op.count > 0 && op.send == own ? MPI_IN_PLACE : op.send;
  }

  bool deterministic_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  StallTimer stall_;  // (after rank_, which it names)
  Handshake handshake_;
  RankOrderedAllReduce rank_ordered_;
  std::string broken_;                   // why no collective may run any more: a mismatch or a stall
  bool stalled_ = false;
  bool left_ = false;                    // depart() was called
};

}  // namespace cocod::comm::mpi_detail
