#pragma once
// One worker: every collective is the identity and completes at once.
#include <cstddef>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>

#include "cocod/comm/communicator.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/comm/detail/byte_blocks.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::comm {

/// The communicator of a single worker (rank 0 of 1).
class Local {
 public:
  struct Request {
    Clock::time_point done = Clock::now();
    void wait() const noexcept {}
    [[nodiscard]] Clock::time_point completed_at() const noexcept { return done; }
    /// Always true: every collective of one worker completes before it returns.
    [[nodiscard]] bool ready() const noexcept { return true; }
  };

  [[nodiscard]] int rank() const noexcept { return 0; }
  [[nodiscard]] int size() const noexcept { return 1; }
  // Every span type (std::span, device_span): with one worker nothing moves.
  template <class Span>
  void broadcast(Span, int root) const {
    if (root != 0)
      throw std::invalid_argument("cocod::comm::Local::broadcast: root must be 0 (got " +
                                  std::to_string(root) + ")");
  }
  template <class Span>
  void all_reduce(Span) const noexcept {}
  template <class Span>
  [[nodiscard]] Request all_reduce_async(Span) const noexcept {
    return Request{};
  }
  /// One block: copies send to recv (host memory, equal sizes, not overlapping; else
  /// std::invalid_argument).
  void all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) const {
    copy("cocod::comm::Local::all_to_all", true, send, recv);
  }
  [[nodiscard]] Request all_to_all_async(std::span<const std::byte> send, std::span<std::byte> recv) const {
    copy("cocod::comm::Local::all_to_all_async", true, send, recv);
    return Request{};
  }
  /// One block: copies send to recv (host memory, equal sizes; send may be recv itself).
  void all_gather(std::span<const std::byte> send, std::span<std::byte> recv) const {
    copy("cocod::comm::Local::all_gather", false, send, recv);
  }
  [[nodiscard]] Request all_gather_async(std::span<const std::byte> send, std::span<std::byte> recv) const {
    copy("cocod::comm::Local::all_gather_async", false, send, recv);
    return Request{};
  }

 private:
  static void copy(const char* where, bool all_to_all, std::span<const std::byte> send, std::span<std::byte> recv) {
    (void)detail::byte_block(all_to_all, where, send, recv, 1, 0);
    if (!send.empty() && send.data() != recv.data()) std::memcpy(recv.data(), send.data(), send.size());
  }
};

}  // namespace cocod::comm
