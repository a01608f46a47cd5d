#pragma once
// What a communicator provides. Communicators are cheap handles (copying one refers to the
// same workers), so optimizers keep them by value.
#include <chrono>
#include <concepts>
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

}  // namespace cocod::comm
