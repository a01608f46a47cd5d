#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/exchange.hpp is internal: include <cocod.hpp>"
#endif
// One reduced buffer and the collective that may be in flight on it: the model part, the
// control slots after it, the request, what the slots carry and when it was posted. It owns the
// completion state: nothing outside it tracks "in flight", and it waits for its collective
// before its memory is freed or reused.
#include <cstddef>
#include <stdexcept>
#include <utility>

#include "cocod/algorithm/detail/control.hpp"
#include "cocod/backend/backend.hpp"
#include "cocod/comm/communicator.hpp"

namespace cocod::detail {

template <class Comm, class B, class T>
class Exchange {
 public:
  using Buffer = backend::buffer<B, T>;
  using Span = typename Buffer::span_type;
  using time_point = comm::Clock::time_point;

  /// What a completed collective reports.
  struct Completion {
    ControlTag tag;
    time_point posted, done;  ///< post and completion of the collective
    time_point t0, t1;        ///< this worker's wait
  };

  Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  ~Exchange() { drain(); }

  /// Room for a model part of n scalars and `control` slots after it, zeroed.
  void resize(std::size_t n, std::size_t control) {
    drain();
    buffer_.resize(n + control);
    model_size_ = n;
  }
  /// The whole buffer, control slots included.
  [[nodiscard]] Span span() noexcept { return buffer_.span(); }
  /// The model part.
  [[nodiscard]] Span model() noexcept { return buffer_.first(model_size_); }
  /// Where the control slots start.
  [[nodiscard]] std::size_t control_offset() const noexcept { return model_size_; }

  [[nodiscard]] bool in_flight() const noexcept { return in_flight_; }
  /// Scalars in the whole buffer.
  [[nodiscard]] std::size_t size() const noexcept { return buffer_.size(); }

  /// Posts the non-blocking all-reduce of the whole buffer, whose slots carry `tag`.
  void post(Comm& comm, ControlTag tag) {
    tag_ = tag;
    posted_ = comm::Clock::now();
    request_ = comm.all_reduce_async(buffer_.span());
    in_flight_ = true;
  }
  /// Waits for the collective in flight (rethrowing its failure), or hands over the one that
  /// settle() completed.
  Completion wait() {
    if (settled_) {
      in_flight_ = settled_ = false;
      return completion_;
    }
    in_flight_ = false;  // a failed wait is not waited for again
    const auto t0 = comm::Clock::now();
    request_.wait();
    const auto t1 = comm::Clock::now();
    return Completion{tag_, posted_, request_.completed_at(), t0, t1};
  }
  /// Completes the collective in flight without handing it over: its result stays in the
  /// buffer, and the next wait() returns at once with it, as if it had waited then. Used before
  /// a checkpoint, which must find nothing in flight.
  void settle() {
    if (!in_flight_ || settled_) return;
    completion_ = wait();  // a failure leaves nothing in flight: the run's failure
    in_flight_ = settled_ = true;
  }
  /// Waits for anything in flight, ignoring its failure: the run already failed, and the
  /// buffer must not be freed while the communicator may still write it.
  void drain() noexcept {
    if (!in_flight_) return;
    in_flight_ = false;
    if (std::exchange(settled_, false)) return;
    try {
      request_.wait();
    } catch (...) {
    }
  }

  /// Run state, between rounds (after settle()): the whole buffer, and whether it holds a
  /// completed result not yet handed over, with the tag of its control slots.
  template <class Archive>
  void serialize(Archive& a) {
    if constexpr (Archive::saving) {
      if (in_flight_ && !settled_) throw std::logic_error("cocod: an exchange is saved while its collective is in flight");
    }
    bool completed = settled_;
    a("completed", completed);
    a("loss_round", tag_.loss_round);
    a("measured", tag_.measured);
    a("buffer", buffer_);
    if constexpr (!Archive::saving) {
      drain();
      in_flight_ = settled_ = completed;
      const auto now = comm::Clock::now();
      completion_ = Completion{tag_, now, now, now, now};
    }
  }

 private:
  Buffer buffer_;
  std::size_t model_size_ = 0;
  typename Comm::Request request_{};
  ControlTag tag_{};
  time_point posted_{};
  Completion completion_{};  // of a settled collective
  bool in_flight_ = false;
  bool settled_ = false;
};

}  // namespace cocod::detail
