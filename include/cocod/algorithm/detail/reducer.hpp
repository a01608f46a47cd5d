#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/reducer.hpp is internal: include <cocod.hpp>"
#endif
// The reducer of a run: the communicator, the control slots and the parts that write them (the
// votes and the step check, the guard, the schedule's window through the run), and the
// exchanges an algorithm prepared. Every reduction passes here: its contribution is checked by
// the guard, its slots written and read, its time recorded, and a partial result normalized to
// the consensus of the finite contributions before the algorithm sees it. Each call names the
// run it serves (`where`: weight(), rank(), step(), and the window's write_window/read_window).
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cocod/algorithm/detail/control.hpp"
#include "cocod/algorithm/detail/exchange.hpp"
#include "cocod/algorithm/detail/guard.hpp"
#include "cocod/algorithm/detail/recorder.hpp"
#include "cocod/backend/backend.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/errors.hpp"
#include "cocod/family/compress.hpp"

namespace cocod::detail {

template <class Comm, class B, class T>
class Reducer {
 public:
  using Span = typename backend::buffer<B, T>::span_type;
  using Exchange = detail::Exchange<Comm, B, T>;

  Reducer(Comm comm, Guard& guard, Recorder& recorder) : comm_(std::move(comm)), guard_(guard), recorder_(recorder) {}

  [[nodiscard]] Comm& comm() noexcept { return comm_; }
  [[nodiscard]] const Comm& comm() const noexcept { return comm_; }
  [[nodiscard]] Votes& votes() noexcept { return votes_; }
  [[nodiscard]] const Votes& votes() const noexcept { return votes_; }

  /// A new run of `workers` workers whose schedule's window takes `window` slots.
  void start(std::size_t workers, std::size_t window) {
    drain();  // what a failed run left in flight
    exchanges_.clear();
    votes_.start(workers);
    control_.start(workers, guard_.slots(), window);
    collectives_ = 0;
  }
  /// Sizes exchange e for a model part of n scalars and the control slots, plain or compressed
  /// (`c`, for models of `total` parameters in at most `pieces` pieces). `name` is its section in
  /// a checkpoint; `may_fly`: a collective may be in flight on it between rounds; `scratch`: its
  /// contents are no run state between rounds.
  void prepare(Exchange& e, const char* name, std::size_t n, const Compress& c, std::size_t total, std::size_t pieces,
               bool may_fly, bool scratch) {
    for (const Exchange* other : exchanges_)
      if (std::string(other->name_) == name)
        throw std::logic_error(std::string("cocod: two exchanges are prepared as '") + name + "': give each its own name");
    e.resize(name, n, control_.size(), pieces > 1, may_fly, scratch);
    if (c.active()) e.codec_.configure(c, static_cast<std::size_t>(comm_.size()), control_.size(), n, total, pieces);
    exchanges_.push_back(&e);
  }
  /// Posts e's non-blocking reduction; a compressed exchange sends its deviation from `reference`.
  template <class Context>
  void post(Exchange& e, Span reference, const Context& where) {
    check_idle(e, "post");
    const ControlTag tag = write(e, where);
    if (e.compressed())
      e.post_compressed(comm_, tag, control_.staging(), reference, static_cast<T>(where.weight()));
    else
      e.post(comm_, tag, control_.staging());
    ++collectives_;
  }
  /// Waits for e's reduction and reads its slots.
  template <class Context>
  void wait(Exchange& e, const Context& where) {
    if (!e.in_flight()) throw std::logic_error("cocod: wait() on an exchange with no collective in flight; post() it first");
    const auto c = e.wait(control_.staging());
    recorder_.awaited(where.step(), c.posted, c.done, c.t0, c.t1, e.bytes_sent());
    read(c.tag, where);
    normalize(e, e.compressed());
  }
  /// e's reduction, blocking (compressed as post() says; `exact`: the plain sum whatever e is).
  template <class Context>
  void reduce(Exchange& e, Span reference, bool exact, const Context& where) {
    check_idle(e, "reduce");
    const ControlTag tag = write(e, where);
    const bool compressed = e.compressed() && !exact;
    const auto t0 = comm::Clock::now();
    if (compressed) {
      e.post_compressed(comm_, tag, control_.staging(), reference, static_cast<T>(where.weight()));
      (void)e.wait(control_.staging());
    } else {
      store(B{}, e.whole(), e.model_size(), std::span<const T>(control_.staging()));
      comm_.all_reduce(e.whole());
      load(B{}, e.whole(), e.model_size(), control_.staging());
    }
    recorder_.blocking(where.step(), t0, comm::Clock::now(), compressed ? e.bytes_sent() : Exchange::ring_bytes(e.whole().size(), comm_.size()));
    ++collectives_;
    read(tag, where);
    normalize(e, compressed);
  }
  /// The control slots alone, blocking: for a round in which the algorithm reduced nothing, so
  /// that losses, votes and the step check still reach every worker.
  template <class Context>
  void reduce_control(const Context& where) {
    const ControlTag tag = write(Span{}, where);
    const auto t0 = comm::Clock::now();
    comm_.all_reduce(control_.staging());
    recorder_.blocking(where.step(), t0, comm::Clock::now(), Exchange::ring_bytes(control_.size(), comm_.size()));
    read(tag, where);
  }
  /// Collectives posted or reduced since the last call.
  std::size_t take_collectives() noexcept { return std::exchange(collectives_, 0); }

  /// Every prepared exchange: advance (between steps), settle (before a checkpoint), drain (a failed run).
  void advance() {
    for (Exchange* e : exchanges_) e->advance();
  }
  void settle() {
    for (Exchange* e : exchanges_) e->settle(control_.staging());
  }
  void drain() noexcept {
    for (Exchange* e : exchanges_) e->drain();
  }
  /// f(name, serialize) for every exchange, in the order prepared.
  template <class F>
  void each_exchange(F&& f) {
    for (Exchange* e : exchanges_) f(e->name_, [e](auto& archive) { e->serialize(archive); });
  }

 private:
  void check_idle(const Exchange& e, const char* what) const {
    if (e.in_flight())
      throw std::logic_error(std::string("cocod: ") + what + "() on an exchange whose collective is in flight; wait() for it first");
    if (e.control_ != control_.size())
      throw std::logic_error(std::string("cocod: ") + what + "() on an exchange that was not prepare()d for this run");
  }
  // The slots of a reduction of `contribution`, which the guard checks first (a NaN or an
  // infinity never enters a reduction: it would reach every worker; it is withheld, zeros sent).
  template <class Context>
  ControlTag write(Exchange& e, const Context& where) {
    return write(e.model(), where);
  }
  template <class Context>
  ControlTag write(Span contribution, const Context& where) {
    const bool measured = where.write_window(control_.window_slots());
    const bool withheld = guard_.template withholds<B>(contribution, where.step());
    if (withheld && contribution.size() > 0) zero(B{}, contribution);
    const std::size_t loss_round =
        votes_.write(control_.vote_slots(), control_.step_slots(), where.weight(), !withheld, where.rank(), where.step());
    guard_.write(control_.guard_slots(), where.weight(), where.rank());
    return ControlTag{loss_round, measured, withheld};
  }
  template <class Context>
  void read(ControlTag tag, const Context& where) {
    guard_.read(std::span<const T>(control_.guard_slots()), tag.withheld);
    votes_.read(std::span<const T>(control_.vote_slots()), std::span<const T>(control_.step_slots()), tag.loss_round, guard_.kept_weight());
    if (const std::string steps = votes_.out_of_step(); !steps.empty())
      throw DistributedError("cocod: the workers are out of step: one reduction joined " + steps +
                             " (every worker must take the same steps: the same run length, period and stop)");
    if (tag.measured) where.read_window(std::span<const T>(control_.window_slots()));
  }
  // A partial result holds the sum of the finite contributions, s = sum_kept w_j v_j (compressed:
  // z + the kept deviations): their weighted average is s / W (z + (s - z) / W), W their weights.
  void normalize(Exchange& e, bool compressed) {
    if (!guard_.partial() || !(guard_.kept_weight() > 0.0)) return;
    if (compressed)
      lerp(B{}, e.model(), e.codec_.reference(), T(1) / static_cast<T>(guard_.kept_weight()));  // (1 - 1/W) z + s / W
    else
      scale(B{}, e.model(), e.model(), static_cast<T>(1.0 / guard_.kept_weight()));
  }

  Comm comm_;
  Guard& guard_;
  Recorder& recorder_;
  ControlSlots<T> control_;
  Votes votes_;
  std::vector<Exchange*> exchanges_;  // the algorithm's, from prepare()
  std::size_t collectives_ = 0;
};

}  // namespace cocod::detail
