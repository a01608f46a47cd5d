#pragma once
// A communicator decorator that counts the collectives and bytes of the one it wraps
// (docs/extending.md).
#include <cocod.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <span>
#include <utility>

template <class Inner>
class Counting {
 public:
  struct Counts {
    std::atomic<std::size_t> collectives{0}, bytes{0};
  };
  // The request type: whatever the inner communicator returns.
  using Request = typename Inner::Request;

  Counting(Inner inner, std::shared_ptr<Counts> counts) : inner_(std::move(inner)), counts_(std::move(counts)) {}

  [[nodiscard]] int rank() const { return inner_.rank(); }
  [[nodiscard]] int size() const { return inner_.size(); }
  template <class Span>
  void broadcast(Span buffer, int root) {
    count(buffer);
    inner_.broadcast(buffer, root);
  }
  template <class Span>
  void all_reduce(Span buffer) {
    count(buffer);
    inner_.all_reduce(buffer);
  }
  template <class Span>
  [[nodiscard]] Request all_reduce_async(Span buffer) {
    count(buffer);
    return inner_.all_reduce_async(buffer);
  }
  // The byte collectives, where the inner communicator has them (a compressed exchange moves
  // its encoded blocks with them; without them a Compress format is refused by name).
  void all_to_all(std::span<const std::byte> send, std::span<std::byte> recv)
    requires cocod::comm::ByteCollectives<Inner>
  {
    count(send);
    inner_.all_to_all(send, recv);
  }
  void all_gather(std::span<const std::byte> send, std::span<std::byte> recv)
    requires cocod::comm::ByteCollectives<Inner>
  {
    count(send);
    inner_.all_gather(send, recv);
  }
  [[nodiscard]] Request all_to_all_async(std::span<const std::byte> send, std::span<std::byte> recv)
    requires cocod::comm::ByteCollectives<Inner>
  {
    count(send);
    return inner_.all_to_all_async(send, recv);
  }
  [[nodiscard]] Request all_gather_async(std::span<const std::byte> send, std::span<std::byte> recv)
    requires cocod::comm::ByteCollectives<Inner>
  {
    count(send);
    return inner_.all_gather_async(send, recv);
  }

 private:
  template <class Span>
  void count(Span buffer) {
    ++counts_->collectives;
    counts_->bytes += buffer.size_bytes();
  }
  Inner inner_;  // communicators are cheap handles: copies refer to the same workers
  std::shared_ptr<Counts> counts_;
};
static_assert(cocod::comm::ByteCollectives<Counting<cocod::comm::Threads>>);
