#pragma once
// A decorator that makes any communicator behave like a link of given latency and bandwidth,
// to study overlap on one machine.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "cocod/comm/communicator.hpp"
#include "cocod/errors.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/comm/detail/byte_blocks.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::comm {

/// An alpha-beta link: a message costs alpha (latency, seconds) + bytes / beta (bandwidth,
/// bytes per second).
struct Link {
  double latency = 0.0;                                         ///< alpha, seconds
  double bandwidth = std::numeric_limits<double>::infinity();  ///< beta, bytes per second

  /// A link from the units people quote: Gbit/s and microseconds.
  static Link gbit(double gigabits_per_second, double latency_us) {
    return Link{latency_us * 1e-6, gigabits_per_second * 1e9 / 8.0};
  }

  void validate() const {
    if (!(latency >= 0.0) || !std::isfinite(latency))
      invalid_setting("cocod::comm::Link", "latency", "must be a finite number >= 0 seconds", latency);
    if (!(bandwidth > 0.0)) invalid_setting("cocod::comm::Link", "bandwidth", "must be > 0 bytes per second", bandwidth);
  }

  /// Ring all-reduce of `bytes` over n workers: 2(n-1) alpha + 2(n-1)/n * bytes/beta.
  [[nodiscard]] double all_reduce_seconds(std::size_t bytes, int n) const noexcept {
    if (n <= 1) return 0.0;
    const double steps = 2.0 * (n - 1);
    return steps * latency + steps / n * static_cast<double>(bytes) / bandwidth;
  }
  /// Pipelined (ring) broadcast: (n-1) alpha + bytes/beta.
  [[nodiscard]] double broadcast_seconds(std::size_t bytes, int n) const noexcept {
    if (n <= 1) return 0.0;
    return (n - 1) * latency + static_cast<double>(bytes) / bandwidth;
  }
  /// Personalized all-to-all of blocks of `block_bytes` (each worker sends one block to each
  /// of the n-1 others, one message at a time): (n-1) alpha + (n-1) * block_bytes/beta.
  [[nodiscard]] double all_to_all_seconds(std::size_t block_bytes, int n) const noexcept {
    if (n <= 1) return 0.0;
    return (n - 1) * (latency + static_cast<double>(block_bytes) / bandwidth);
  }
  /// Ring all-gather of one block of `block_bytes` from each worker (n-1 steps, each passing
  /// one block on): (n-1) alpha + (n-1) * block_bytes/beta.
  [[nodiscard]] double all_gather_seconds(std::size_t block_bytes, int n) const noexcept {
    if (n <= 1) return 0.0;
    return (n - 1) * (latency + static_cast<double>(block_bytes) / bandwidth);
  }
};

/// Wraps communicator C so that each collective completes no earlier than the Link's cost
/// after it starts; a collective starts when it is posted or when the previous one of this
/// worker finished, whichever is later (one link, used by one collective at a time). Waiting
/// sleeps; it does not burn CPU. Results are those of C, unchanged.
///
/// \tparam C the communicator that moves the data (comm::Threads, comm::Mpi, ...).
template <class C>
class Throttled {
 public:
  class Request {
   public:
    Request() = default;
    void wait() {
      inner_.wait();
      std::this_thread::sleep_until(deadline_);
    }
    [[nodiscard]] Clock::time_point completed_at() const {
      return std::max(inner_.completed_at(), deadline_);
    }
    /// Whether wait() would return at once: the inner collective completed and the link's cost
    /// has elapsed. Never blocks, never throws (where C's ready() does not).
    [[nodiscard]] bool ready()
      requires requires(typename C::Request& r) {
        { r.ready() } -> std::convertible_to<bool>;
      }
    {
      return inner_.ready() && Clock::now() >= deadline_;
    }

   private:
    friend class Throttled;
    Request(typename C::Request inner, Clock::time_point deadline)
        : inner_(std::move(inner)), deadline_(deadline) {}
    typename C::Request inner_{};
    Clock::time_point deadline_{};
  };

  Throttled(C inner, Link link)
      : inner_(std::move(inner)), link_(link), link_free_at_(std::make_shared<Clock::time_point>()) {
    link_.validate();
  }

  [[nodiscard]] int rank() const { return inner_.rank(); }
  [[nodiscard]] int size() const { return inner_.size(); }
  [[nodiscard]] const Link& link() const noexcept { return link_; }

  // Spans of any memory the inner communicator accepts (std::span, device_span).
  template <class Span>
    requires requires(C& c, Span s) { c.broadcast(s, 0); }
  void broadcast(Span buffer, int root) {
    const auto deadline = reserve(link_.broadcast_seconds(buffer.size_bytes(), size()));
    inner_.broadcast(buffer, root);
    std::this_thread::sleep_until(deadline);
  }
  template <class Span>
    requires requires(C& c, Span s) { c.all_reduce_async(s); }
  void all_reduce(Span buffer) {
    all_reduce_async(buffer).wait();
  }
  template <class Span>
    requires requires(C& c, Span s) { c.all_reduce_async(s); }
  [[nodiscard]] Request all_reduce_async(Span buffer) {
    const auto deadline = reserve(link_.all_reduce_seconds(buffer.size_bytes(), size()));
    return Request(inner_.all_reduce_async(buffer), deadline);
  }
  /// Byte collectives (where C has them, host memory): each charges the link
  /// Link::all_to_all_seconds or Link::all_gather_seconds of its block size, on the same link as
  /// the other collectives. Sizes are checked (std::invalid_argument) before the link is taken.
  void all_to_all(std::span<const std::byte> send, std::span<std::byte> recv)
    requires requires(C& c, std::span<const std::byte> s, std::span<std::byte> r) { c.all_to_all(s, r); }
  {
    const auto deadline = reserve(link_.all_to_all_seconds(a2a_block("all_to_all", send, recv), size()));
    inner_.all_to_all(send, recv);
    std::this_thread::sleep_until(deadline);
  }
  [[nodiscard]] Request all_to_all_async(std::span<const std::byte> send, std::span<std::byte> recv)
    requires requires(C& c, std::span<const std::byte> s, std::span<std::byte> r) { c.all_to_all_async(s, r); }
  {
    const auto deadline = reserve(link_.all_to_all_seconds(a2a_block("all_to_all_async", send, recv), size()));
    return Request(inner_.all_to_all_async(send, recv), deadline);
  }
  void all_gather(std::span<const std::byte> send, std::span<std::byte> recv)
    requires requires(C& c, std::span<const std::byte> s, std::span<std::byte> r) { c.all_gather(s, r); }
  {
    const auto deadline = reserve(link_.all_gather_seconds(gather_block("all_gather", send, recv), size()));
    inner_.all_gather(send, recv);
    std::this_thread::sleep_until(deadline);
  }
  [[nodiscard]] Request all_gather_async(std::span<const std::byte> send, std::span<std::byte> recv)
    requires requires(C& c, std::span<const std::byte> s, std::span<std::byte> r) { c.all_gather_async(s, r); }
  {
    const auto deadline = reserve(link_.all_gather_seconds(gather_block("all_gather_async", send, recv), size()));
    return Request(inner_.all_gather_async(send, recv), deadline);
  }
  /// Forwards progress() to communicators that need to be driven (comm::Mpi's caller design).
  void progress()
    requires requires(C& c) { c.progress(); }
  {
    inner_.progress();
  }

 private:
  std::size_t a2a_block(const char* call, std::span<const std::byte> send, std::span<std::byte> recv) const {
    return detail::byte_block(true, (std::string("cocod::comm::Throttled::") + call).c_str(), send, recv, size(), rank());
  }
  std::size_t gather_block(const char* call, std::span<const std::byte> send, std::span<std::byte> recv) const {
    return detail::byte_block(false, (std::string("cocod::comm::Throttled::") + call).c_str(), send, recv, size(), rank());
  }
  Clock::time_point reserve(double seconds) {
    const auto start = std::max(Clock::now(), *link_free_at_);
    const auto end = start + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(seconds));
    *link_free_at_ = end;
    return end;
  }
  C inner_;
  Link link_;
  std::shared_ptr<Clock::time_point> link_free_at_;
};

}  // namespace cocod::comm
