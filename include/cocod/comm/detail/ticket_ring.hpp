#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/ticket_ring.hpp is internal: include a communicator's header"
#endif
// What the communicators that run collectives in posting order share (comm::Threads, comm::Mpi):
// the description of a collective, and a fixed ring of them with tickets, completion times and
// errors. Posting allocates nothing. Callers hold their own mutex around every member.
#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "cocod/comm/communicator.hpp"
#include "cocod/comm/detail/host_staging.hpp"

namespace cocod::comm::detail {

enum class Op : std::uint8_t { all_reduce, broadcast, all_to_all, all_gather, broadcast_bytes };

[[nodiscard]] constexpr bool moves_bytes(Op op) noexcept { return op == Op::all_to_all || op == Op::all_gather; }

/// One collective as posted: what, on which host buffer, of which scalar. A byte collective
/// (all_to_all, all_gather) receives into `data`, sends from `send`, and `count` is the size of
/// one block in bytes (is_double false, root 0).
struct Collective {
  Op op = Op::all_reduce;
  bool is_double = false;
  void* data = nullptr;
  std::size_t count = 0;
  int root = 0;
  const void* send = nullptr;
};

/// The collective `op` on a host buffer of float or double.
template <class T>
[[nodiscard]] Collective collective(Op op, std::span<T> buffer, int root) noexcept {
  return Collective{op, std::is_same_v<T, double>, buffer.data(), buffer.size(), root};
}

/// The broadcast of `buffer`'s bytes from `root` (`count` in bytes).
[[nodiscard]] inline Collective byte_broadcast(std::span<std::byte> buffer, int root) noexcept {
  return Collective{Op::broadcast_bytes, false, buffer.data(), buffer.size(), root};
}
/// The size of one element of a broadcast or all-reduce of `c`, in bytes.
[[nodiscard]] inline std::size_t element_size(const Collective& c) noexcept {
  return c.op == Op::broadcast_bytes ? 1 : c.is_double ? sizeof(double) : sizeof(float);
}

/// The byte collective `op` (all_to_all or all_gather) with blocks of `block` bytes.
[[nodiscard]] inline Collective byte_collective(Op op, std::span<const std::byte> send, std::span<std::byte> recv,
                                                std::size_t block) noexcept {
  return Collective{op, false, recv.data(), block, 0, send.data()};
}

/// Throws std::invalid_argument unless `root` is a rank of `size` workers; `where` names the
/// caller, `unit` follows the size in the message.
inline void check_root(const char* where, int root, int size, const char* unit = "") {
  if (root < 0 || root >= size)
    throw std::invalid_argument(std::string(where) + ": root " + std::to_string(root) + " is not a rank of " +
                                std::to_string(size) + unit);
}

inline std::string describe(const Collective& c) {
  if (moves_bytes(c.op))
    return std::string(c.op == Op::all_to_all ? "all_to_all" : "all_gather") + " of blocks of " +
           std::to_string(c.count) + (c.count == 1 ? " byte" : " bytes");
  if (c.op == Op::broadcast_bytes)
    return "broadcast of " + std::to_string(c.count) + (c.count == 1 ? " byte" : " bytes") + " from root " +
           std::to_string(c.root);
  return std::string(c.op == Op::all_reduce ? "all_reduce" : "broadcast") + " of " + std::to_string(c.count) +
         (c.is_double ? " doubles" : " floats") + (c.op == Op::broadcast ? " from root " + std::to_string(c.root) : "");
}

/// Collectives in posting order: ticket t is posted as the t-th and completes as the t-th.
template <class Job, std::size_t Capacity = 64>
struct TicketRing {
  static constexpr std::size_t capacity = Capacity;

  [[nodiscard]] bool full() const noexcept { return posted - completed >= Capacity; }
  [[nodiscard]] bool pending() const noexcept { return posted > completed; }
  [[nodiscard]] bool done(std::uint64_t ticket) const noexcept { return completed > ticket; }

  /// Queues a job (the ring must not be full); returns its ticket.
  std::uint64_t push(const Job& job) {
    const std::size_t slot = posted % Capacity;
    jobs[slot] = job;
    errors[slot] = nullptr;  // the slot may hold the error of its previous use
    return posted++;
  }
  /// The oldest job not yet completed, and its ticket.
  [[nodiscard]] Job& head() noexcept { return jobs[completed % Capacity]; }
  [[nodiscard]] std::uint64_t head_ticket() const noexcept { return completed; }
  /// Completes the oldest job, with its failure if any.
  void retire(std::exception_ptr error = nullptr) {
    const std::size_t slot = completed % Capacity;
    done_at[slot] = Clock::now();
    errors[slot] = error;
    if (error && !first_error) {
      first_error = error;
      first_error_ticket = completed;
    }
    ++completed;
  }
  /// When a completed ticket completed; rethrows its failure. The time is valid until Capacity
  /// more complete. Once Capacity later tickets were posted, the ticket's slot holds another and
  /// its own outcome is gone; what the ring still knows decides: a ticket before the first
  /// failure succeeded (else it would be the first), and one at or after it is reported with
  /// that failure rather than as a success that may be false (a group that failed is broken).
  [[nodiscard]] Clock::time_point result(std::uint64_t ticket) const {
    const std::size_t slot = ticket % Capacity;
    const bool held = posted - ticket <= Capacity;
    if (held && errors[slot]) std::rethrow_exception(errors[slot]);
    if (!held && first_error && ticket >= first_error_ticket) std::rethrow_exception(first_error);
    return done_at[slot];
  }

  std::array<Job, Capacity> jobs{};
  std::array<Clock::time_point, Capacity> done_at{};
  std::array<std::exception_ptr, Capacity> errors{};
  std::uint64_t posted = 0;
  std::uint64_t completed = 0;
  std::exception_ptr first_error;  // the first ticket that failed, kept when its slot is reused
  std::uint64_t first_error_ticket = 0;
};

/// The request of a collective queued in a TicketRing: `Queue::wait(ticket)` blocks until the
/// ticket completed and returns when; `Queue::ready(ticket)` (noexcept) says whether it has. For
/// device buffers wait() then copies the staged host result back (set by StagedDeviceCollectives).
/// It owns the collective: move-only, and a request that goes without wait() is waited for when
/// it is destroyed or replaced (its failure ignored), so that the communicator never writes a
/// buffer its owner has already freed.
template <class Queue>
class TicketRequest {
 public:
  TicketRequest() = default;
  TicketRequest(Queue* queue, std::uint64_t ticket) : queue_(queue), ticket_(ticket) {}
  TicketRequest(TicketRequest&& o) noexcept
      : queue_(std::exchange(o.queue_, nullptr)),
        ticket_(o.ticket_),
        done_(o.done_),
        staged_(std::exchange(o.staged_, nullptr)) {}
  TicketRequest& operator=(TicketRequest&& o) noexcept {
    if (this != &o) {
      settle();
      queue_ = std::exchange(o.queue_, nullptr);
      ticket_ = o.ticket_;
      done_ = o.done_;
      staged_ = std::exchange(o.staged_, nullptr);
    }
    return *this;
  }
  TicketRequest(const TicketRequest&) = delete;
  TicketRequest& operator=(const TicketRequest&) = delete;
  ~TicketRequest() { settle(); }

  void wait() {
    if (queue_) done_ = queue_->wait(ticket_);
    queue_ = nullptr;
    HostStaging::finish(std::exchange(staged_, nullptr));
  }
  [[nodiscard]] Clock::time_point completed_at() const noexcept { return done_; }
  /// Whether the collective completed, so that wait() returns at once (and rethrows its failure,
  /// if it failed). Never blocks, never throws; true once waited for, and for an empty request.
  [[nodiscard]] bool ready() const noexcept { return !queue_ || queue_->ready(ticket_); }

 private:
  void settle() noexcept {
    if (!queue_ && !staged_) return;
    try {
      wait();
    } catch (...) {  // the run already failed; what matters is that nothing writes the buffer now
    }
  }
  template <class>
  friend class StagedDeviceCollectives;
  Queue* queue_ = nullptr;
  std::uint64_t ticket_ = 0;
  Clock::time_point done_{};
  HostStaging::Slot* staged_ = nullptr;  // device buffers: the host copy to copy back
};

}  // namespace cocod::comm::detail
