#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/exchange.hpp is internal: include <cocod.hpp>"
#endif
// One reduced buffer and the collective that may be in flight on it: the model part, the
// control slots after it, the request, what the slots carry and when it was posted. It owns the
// completion state: nothing outside it tracks "in flight", and it waits for its collective
// before its memory is freed or reused. A compressed exchange (Options::compress) moves encoded
// deviations in two collectives with the owner's sum between them (compressed.hpp).
#include <cstddef>
#include <span>
#include <vector>
#include <stdexcept>
#include <string>
#include <utility>

#include "cocod/algorithm/detail/compressed.hpp"
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
    model_size_ = capacity_ = n;
    control_size_ = control;
    pieces_ = false;
    codec_ = Compressed<T>{};
  }
  /// Lets use() shrink the model part (an exchange of fragments).
  void allow_pieces() noexcept { pieces_ = true; }
  /// The model part's length from now on: at most the size given to resize() (a fragment's
  /// exchange); the control slots follow it.
  void use(std::size_t n) {
    if (in_flight_) throw std::logic_error("cocod: an exchange is resized while its collective is in flight");
    if (n > capacity_ || (n != capacity_ && !pieces_))
      throw std::logic_error("cocod: an exchange's model part beyond its capacity, or a piece of one that takes none");
    model_size_ = n;
  }
  /// Makes every later post() (until resize()) a compressed one: deviations from a reference
  /// held by every worker, encoded as `format` in blocks of `block`, for models of `total`
  /// parameters exchanged in at most `fragments` pieces.
  void compress(Compression format, std::size_t block, int workers, std::size_t total, std::size_t fragments) {
    codec_.configure(format, block, static_cast<std::size_t>(workers), control_size_, capacity_, total, fragments);
  }
  [[nodiscard]] bool compressed() const noexcept { return codec_.active(); }
  /// The whole buffer in use, control slots included.
  [[nodiscard]] Span span() noexcept { return buffer_.first(model_size_ + control_size_); }
  /// The model part.
  [[nodiscard]] Span model() noexcept { return buffer_.first(model_size_); }
  /// Where the control slots start.
  [[nodiscard]] std::size_t control_offset() const noexcept { return model_size_; }
  /// The model part's length (at most the size given to resize()).
  [[nodiscard]] std::size_t model_size() const noexcept { return model_size_; }

  [[nodiscard]] bool in_flight() const noexcept { return in_flight_; }
  /// Control slots after the model part.
  [[nodiscard]] std::size_t control_size() const noexcept { return control_size_; }
  /// Bytes this worker sent for its latest collective (a ring all-reduce sends 2 (N - 1) / N of
  /// the buffer; a compressed exchange its encoded blocks).
  [[nodiscard]] double bytes_sent() const noexcept { return bytes_; }

  /// Posts the non-blocking all-reduce of the whole buffer, whose slots carry `tag`.
  void post(Comm& comm, ControlTag tag) {
    tag_ = tag;
    posted_ = comm::Clock::now();
    request_ = comm.all_reduce_async(span());
    bytes_ = ring_bytes(span().size(), comm.size());
    in_flight_ = true;
  }
  /// Bytes a ring all-reduce of n scalars sends per worker among `workers`: 2 (N - 1) / N of them.
  [[nodiscard]] static double ring_bytes(std::size_t n, int workers) noexcept {
    const double N = workers;
    return workers <= 1 ? 0.0 : 2.0 * (N - 1.0) / N * static_cast<double>(n * sizeof(T));
  }
  /// Posts a compressed exchange of the model part, s = w a (written there), as the deviation
  /// from `reference` (the same piece of z on every worker, unchanged until wait() returns):
  /// after wait() the model part holds z + D(sum). `offset` and `fragment` locate the piece.
  void post_compressed(Comm& comm, ControlTag tag, Span reference, T w, std::size_t offset, std::size_t fragment) {
    if constexpr (comm::ByteCollectives<Comm>) {
      const std::size_t n = model_size_;
      if (reference.size() != n)
        throw std::logic_error("cocod: a compressed exchange is posted with a reference of " + std::to_string(reference.size()) +
                               " values for a model part of " + std::to_string(n) + " (post(exchange, z, offset, fragment))");
      host_model_.resize(n + control_size_);
      host_reference_.resize(n);
      load(B{}, span(), 0, std::span<T>(host_model_));
      load(B{}, reference, 0, std::span<T>(host_reference_));
      codec_.encode(std::span<const T>(host_model_.data(), n), host_reference_, w, offset, fragment,
                    std::span<const T>(host_model_.data() + n, control_size_), tag.withheld);
      tag_ = tag;
      posted_ = comm::Clock::now();
      comm_ = &comm;
      request_ = comm.all_to_all_async(codec_.send1(), codec_.recv1());
      phase_ = 1;
      bytes_ = codec_.bytes_sent();
      in_flight_ = true;
    } else {
      (void)comm, (void)tag, (void)reference, (void)w, (void)offset, (void)fragment;
      throw std::logic_error("cocod: a compressed exchange needs a communicator with all_to_all_async and all_gather_async");
    }
  }
  /// Moves a compressed exchange on when its first collective has completed: the owner's sum,
  /// and the post of the second. Call it between steps; it never blocks.
  void advance() {
    if constexpr (comm::ByteCollectives<Comm>) {
      if (!in_flight_ || settled_ || phase_ != 1) return;
      if constexpr (requires { request_.ready(); })
        if (request_.ready()) second_phase();
    }
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
    if constexpr (comm::ByteCollectives<Comm>) {
      if (phase_ != 0) {
        if (phase_ == 1) second_phase();
        phase_ = 0;
        request_.wait();
        load_result();
        const auto t1 = comm::Clock::now();
        return Completion{tag_, posted_, request_.completed_at(), t0, t1};
      }
    }
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
    phase_ = 0;  // a compressed exchange's first collective is waited for; no second is posted
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
    a("model_size", model_size_);
    a("bytes_sent", bytes_);
    if (codec_.active()) codec_.serialize(a);
    if constexpr (!Archive::saving) {
      if (model_size_ > capacity_ || (model_size_ != capacity_ && !pieces_))
        a.fail("model_size", "is not a size this exchange can have (corrupt)");
      drain();
      in_flight_ = settled_ = completed;
      const auto now = comm::Clock::now();
      completion_ = Completion{tag_, now, now, now, now};
    }
  }

 private:
  // The owner's sum of the first collective's blocks, and the post of the second.
  void second_phase() {
    if constexpr (comm::ByteCollectives<Comm>) {
      phase_ = 0;  // a failure of the first collective leaves nothing in flight
      request_.wait();
      codec_.reduce();
      request_ = comm_->all_gather_async(codec_.send2(), codec_.recv2());
      phase_ = 2;
    }
  }
  // abar = z + D(C) and the summed control slots into the buffer.
  void load_result() {
    const std::size_t n = model_size_;
    codec_.finish(host_reference_, std::span<T>(host_model_.data(), n), std::span<T>(host_model_.data() + n, control_size_));
    store(B{}, span(), 0, std::span<const T>(host_model_));
  }

  Buffer buffer_;
  std::size_t model_size_ = 0, capacity_ = 0, control_size_ = 0;
  bool pieces_ = false;  // use() may shrink the model part
  Compressed<T> codec_;
  std::vector<T> host_model_, host_reference_;  // host copies of the posted piece and its reference
  Comm* comm_ = nullptr;                        // of a compressed exchange in flight
  int phase_ = 0;                               // of a compressed exchange: 1 all-to-all, 2 all-gather
  double bytes_ = 0.0;
  typename Comm::Request request_{};
  ControlTag tag_{};
  time_point posted_{};
  Completion completion_{};  // of a settled collective
  bool in_flight_ = false;
  bool settled_ = false;
};

}  // namespace cocod::detail
