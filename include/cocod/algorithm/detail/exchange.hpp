#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/exchange.hpp is internal: include <cocod.hpp>"
#endif
// One reduced buffer and the collective that may be in flight on it: the model part, the
// control slots after it, the request, what the slots carry and when it was posted. It owns the
// completion state: nothing outside it tracks "in flight", and it waits for its collective
// before its memory is freed or reused. Its transport is chosen once, when it is prepared: the
// plain all-reduce of the whole buffer, or the compressed exchange of deviations (compressed.hpp).
// An algorithm sees only the model part; the run's reducer posts and waits.
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "cocod/algorithm/detail/compressed.hpp"
#include "cocod/algorithm/detail/control.hpp"
#include "cocod/backend/backend.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/family/fragments.hpp"

namespace cocod::detail {

template <class Comm, class B, class T>
class Reducer;

template <class Comm, class B, class T>
class Exchange {
 public:
  using Span = typename backend::buffer<B, T>::span_type;

  Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  ~Exchange() { drain(); }

  /// The model part: what the algorithm writes before a post, and the average after the wait.
  [[nodiscard]] Span model() noexcept { return buffer_.first(piece_.size); }
  /// Its length (at most the size it was prepared with).
  [[nodiscard]] std::size_t model_size() const noexcept { return piece_.size; }
  /// Its name (ExchangeSpec::name): its section in a checkpoint, and in messages.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// A collective is in flight on it (or completed and not yet waited for).
  [[nodiscard]] bool in_flight() const noexcept { return in_flight_; }
  /// An exchange of pieces (prepared with pieces > 1): the piece of the model posted next, at
  /// most its size, within the model it was prepared for, fragment p.index of its pieces.
  void use(const Piece& p) {
    const std::string what = "cocod: use() on exchange '" + name_ + "': ";
    if (in_flight_) throw std::logic_error(what + "its collective is in flight; wait() for it first");
    if (pieces_ == 1 && p.size != capacity_)
      throw std::logic_error(what + "it takes no pieces (prepare it with ExchangeSpec::pieces > 1)");
    if (p.size > capacity_ || p.offset > total_ || p.size > total_ - p.offset || p.index >= pieces_)
      throw std::logic_error(what + "piece " + std::to_string(p.index) + " of " + std::to_string(p.size) + " values at offset " +
                             std::to_string(p.offset) + " does not fit (its size " + std::to_string(capacity_) + ", model " +
                             std::to_string(total_) + ", pieces " + std::to_string(pieces_) + ")");
    piece_ = p;
  }
  /// Bytes this rank sent for its latest collective (a ring all-reduce sends 2 (N - 1) / N of
  /// the buffer; a compressed exchange its encoded blocks; a rank of a group its share).
  [[nodiscard]] double bytes_sent() const noexcept { return bytes_; }

 private:
  friend class Reducer<Comm, B, T>;
  using time_point = comm::Clock::time_point;
  struct Completion {
    ControlTag tag;
    time_point posted, done;  // post and completion of the collective
    time_point t0, t1;        // this worker's wait
  };

  /// Bytes a ring all-reduce of n scalars sends per worker among `workers`: 2 (N - 1) / N of them.
  [[nodiscard]] static double ring_bytes(std::size_t n, int workers) noexcept {
    const double N = workers;
    return workers <= 1 ? 0.0 : 2.0 * (N - 1.0) / N * static_cast<double>(n * sizeof(T));
  }
  /// This rank's part of what its worker sends: a worker that is a group of G ranks
  /// (comm::Grouped) sends each collective slice by slice, one slice per rank, so a rank sends
  /// 1/G of it (the members' mean, exactly: their slices add up to the whole).
  [[nodiscard]] static double rank_share(const Comm& comm, double bytes) noexcept {
    if constexpr (requires { comm.members(); }) return bytes / comm.members();
    else return bytes;
  }

  void resize(const std::string& name, std::size_t n, std::size_t total, std::size_t control, std::size_t pieces, bool may_fly,
              bool scratch, std::size_t generation) {
    drain();
    name_ = name;
    scratch_ = scratch;
    buffer_.resize(n + control);
    piece_ = Piece{0, n, 0};
    capacity_ = n;
    total_ = total;
    control_ = control;
    pieces_ = pieces;
    may_fly_ = may_fly;
    generation_ = generation;
    codec_ = Compressed<Comm, B, T>{};
  }
  // A compressed exchange's reference: the same piece of the outer model, as long as the model part.
  void check_reference(Span reference) const {
    if (reference.size() != piece_.size)
      throw std::logic_error("cocod: compressed exchange '" + name_ + "' is posted with a reference of " +
                             std::to_string(reference.size()) + " values for a model part of " + std::to_string(piece_.size));
  }
  [[nodiscard]] bool compressed() const noexcept { return codec_.active(); }
  [[nodiscard]] Span whole() noexcept { return buffer_.first(piece_.size + control_); }

  /// The plain transport: the control slots after the model part, the whole buffer all-reduced.
  void post(Comm& comm, ControlTag tag, std::span<const T> control) {
    store(B{}, whole(), piece_.size, control);
    posted(tag);
    request_ = comm.all_reduce_async(whole());
    bytes_ = rank_share(comm, ring_bytes(piece_.size + control_, comm.size()));
  }
  /// The compressed transport: s = w a (in the model part) as its deviation from `reference`.
  void post_compressed(Comm& comm, ControlTag tag, std::span<const T> control, Span reference, T w) {
    if constexpr (comm::ByteCollectives<Comm>) {
      posted(tag);
      codec_.post(comm, model(), reference, w, piece_, control, tag.withheld);
      bytes_ = rank_share(comm, codec_.bytes_sent());
    } else {
      (void)comm, (void)tag, (void)control, (void)reference, (void)w;
      throw std::logic_error("cocod: compressed exchange '" + name_ + "' needs a communicator with all_to_all_async and all_gather_async");
    }
  }
  // (before the collective is posted: a communicator may complete it right there)
  void posted(ControlTag tag) {
    tag_ = tag;
    posted_ = comm::Clock::now();
    in_flight_ = true;
  }
  /// A compressed exchange's second collective, posted once the first has completed. Never blocks.
  void advance() {
    if constexpr (comm::ByteCollectives<Comm>)
      if (in_flight_ && !settled_ && compressed()) codec_.advance();
  }
  /// Waits for the collective in flight (rethrowing its failure), the summed control slots into
  /// `control`; or hands over the one that settle() completed.
  Completion wait(std::span<T> control) {
    if (settled_) {
      in_flight_ = settled_ = false;
      load(B{}, whole(), piece_.size, control);
      return completion_;
    }
    in_flight_ = false;  // a failed wait is not waited for again
    const auto t0 = comm::Clock::now();
    time_point done;
    if constexpr (comm::ByteCollectives<Comm>) {
      if (compressed()) {
        done = codec_.wait(model(), control);
        return Completion{tag_, posted_, done, t0, comm::Clock::now()};
      }
    }
    request_.wait();
    load(B{}, whole(), piece_.size, control);
    return Completion{tag_, posted_, request_.completed_at(), t0, comm::Clock::now()};
  }
  /// Completes the collective in flight without handing it over: its result stays in the
  /// buffer, and the next wait() returns at once with it, as if it had waited then. Used before
  /// a checkpoint, which must find nothing in flight.
  void settle(std::span<T> scratch) {
    if (!in_flight_ || settled_) return;
    completion_ = wait(scratch);  // a failure leaves nothing in flight: the run's failure
    if (compressed()) store(B{}, whole(), piece_.size, std::span<const T>(scratch));  // where the plain result's slots are
    in_flight_ = settled_ = true;
  }
  /// Waits for anything in flight, ignoring its failure: the run already failed, and the
  /// buffer must not be freed while the communicator may still write it.
  void drain() noexcept {
    if (!in_flight_) return;
    in_flight_ = false;
    if (std::exchange(settled_, false)) return;
    if (compressed()) return codec_.drain();
    try {
      if constexpr (requires { request_.abandon(); }) request_.abandon();  // (comm::Grouped: no gather)
      else request_.wait();
    } catch (...) {
    }
  }

  /// Run state, between rounds (after settle()): the whole buffer, and whether it holds a
  /// completed result not yet handed over, with the tag of its control slots.
  template <class Archive>
  void serialize(Archive& a) {
    if constexpr (Archive::saving)
      if ((in_flight_ && !settled_) || (in_flight_ && scratch_))
        throw std::logic_error("cocod: exchange '" + name_ + "' is saved while its collective is in flight");
    bool completed = settled_;
    a("completed", completed);
    a("loss_round", tag_.loss_round);
    a("measured", tag_.measured);
    if (!scratch_) a("buffer", buffer_);  // (a scratch exchange's contents are rewritten before every use)
    a("model_size", piece_.size);
    a("bytes_sent", bytes_);
    if (compressed()) codec_.serialize(a);
    if constexpr (!Archive::saving) {
      if (piece_.size > capacity_ || (piece_.size != capacity_ && pieces_ == 1))
        a.fail("model_size", "is not a size this exchange can have (corrupt)");
      if (completed && (!may_fly_ || scratch_))
        a.fail("completed", "says that a collective is in flight on exchange '" + name_ + "', which has none between rounds (corrupt)");
      drain();
      in_flight_ = settled_ = completed;
      const auto now = comm::Clock::now();
      completion_ = Completion{tag_, now, now, now, now};
    }
  }

  backend::buffer<B, T> buffer_;
  std::string name_;
  Piece piece_{};
  std::size_t capacity_ = 0, total_ = 0, control_ = 0;
  std::size_t pieces_ = 1;     // > 1: use() may choose a piece of the model
  std::size_t generation_ = 0;  // of the run it was prepared for
  bool may_fly_ = false;  // a collective may be in flight between rounds
  bool scratch_ = false;  // its contents are no run state between rounds: a checkpoint saves none of them
  Compressed<Comm, B, T> codec_;
  double bytes_ = 0.0;
  typename Comm::Request request_{};
  ControlTag tag_{};
  time_point posted_{};
  Completion completion_{};  // of a settled collective
  bool in_flight_ = false;
  bool settled_ = false;
};

}  // namespace cocod::detail
