#pragma once
// What a communicator provides. Communicators are cheap handles (copying one refers to the
// same workers), so trainers keep them by value.
#include <chrono>
#include <concepts>
#include <cstddef>
#include <span>

namespace cocod::comm {

using Clock = std::chrono::steady_clock;

/// The handle of a non-blocking collective: wait() blocks until it completed (and rethrows its
/// failure); completed_at() is when it completed, valid after wait().
template <class R>
concept Request = std::default_initializable<R> && std::movable<R> && requires(R& r, const R& cr) {
  r.wait();
  { cr.completed_at() } -> std::convertible_to<Clock::time_point>;
};

/// A communicator between the N workers of a run:
///  - rank() in [0, N) and size() = N;
///  - broadcast(buffer, root): every worker gets root's buffer;
///  - all_reduce(buffer): in-place element-wise sum over the workers, blocking;
///  - all_reduce_async(buffer) -> Request: the same, returning at once; the buffer belongs to
///    the communicator until the request's wait() returns.
/// Collectives are called in the same order on every worker. All are available for float and
/// double buffers.
template <class C>
concept Communicator = std::copy_constructible<C> &&
    requires(C& c, const C& cc, std::span<float> f, std::span<double> d) {
  typename C::Request;
  requires Request<typename C::Request>;
  { cc.rank() } -> std::convertible_to<int>;
  { cc.size() } -> std::convertible_to<int>;
  c.broadcast(f, 0);
  c.broadcast(d, 0);
  c.all_reduce(f);
  c.all_reduce(d);
  { c.all_reduce_async(f) } -> std::same_as<typename C::Request>;
  { c.all_reduce_async(d) } -> std::same_as<typename C::Request>;
};

/// A communicator that also moves opaque bytes in host memory (every built-in host
/// communicator: comm::Local, comm::Threads, comm::Mpi, comm::Gloo, and comm::Throttled<C> and
/// comm::Grouped<C> of one; comm::Nccl moves bytes in device memory, with device spans). With
/// N = size() and b bytes per block:
///  - all_to_all(send, recv): send and recv hold N blocks of b bytes each (equal sizes, not
///    overlapping); block j of send goes to rank j, block q of recv comes from rank q (block
///    rank() is a copy of one's own); blocking;
///  - all_gather(send, recv): send is one block of b bytes, recv N blocks; block q of recv is
///    rank q's send. send may be recv's block rank() (in place); otherwise they must not overlap;
///  - broadcast(bytes, root): every worker gets root's bytes (the same size on every worker);
///    blocking;
///  - all_to_all_async and all_gather_async: the same, returning at once; both buffers belong to
///    the communicator until the request's wait() returns;
///  - Request::ready(): whether the collective completed, so that wait() returns at once (a
///    failed one is ready: wait() rethrows); never blocks, never throws.
/// Bad sizes throw std::invalid_argument. These take part in the posting order of the other
/// collectives and in their error handling: workers that call different collectives or block
/// sizes raise the same DistributedError. It refines Communicator, which stays as it is: a
/// communicator without byte collectives is still a Communicator.
template <class C>
concept ByteCollectives = Communicator<C> &&
    requires(C& c, std::span<const std::byte> send, std::span<std::byte> recv, typename C::Request& request) {
  c.broadcast(recv, 0);
  c.all_to_all(send, recv);
  c.all_gather(send, recv);
  { c.all_to_all_async(send, recv) } -> std::same_as<typename C::Request>;
  { c.all_gather_async(send, recv) } -> std::same_as<typename C::Request>;
  { request.ready() } -> std::same_as<bool>;
};

}  // namespace cocod::comm
