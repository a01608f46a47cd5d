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
#include <algorithm>
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
#include "cocod/algorithm/exchange_spec.hpp"
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

  /// A new run of `workers` workers whose schedule's window takes `window` slots (nothing is in
  /// flight: the run drained what a failed run left).
  void start(std::size_t workers, std::size_t window) {
    exchanges_.clear();
    ++generation_;
    votes_.start(workers);
    control_.start(workers, guard_.slots(), window);
    collectives_ = 0;
  }
  /// Sizes exchange e for this run as `s` says: a model part of s.size scalars and the control
  /// slots, plain or compressed, whole or in pieces of a model of s.model parameters.
  void prepare(Exchange& e, const ExchangeSpec& s) {
    const std::string what = "cocod: prepare(): exchange '" + s.name + "': ";
    if (s.name.empty()) throw std::logic_error("cocod: prepare(): an exchange needs a name (ExchangeSpec::name)");
    for (const Exchange* other : exchanges_)
      if (other->name_ == s.name) throw std::logic_error(what + "two exchanges have this name: give each its own");
    const std::size_t total = s.model ? s.model : s.size;
    if (s.pieces == 0) throw std::logic_error(what + "ExchangeSpec::pieces must be at least 1");
    if (total < s.size)
      throw std::logic_error(what + "ExchangeSpec::model (" + std::to_string(total) + ") is smaller than its size (" +
                             std::to_string(s.size) + ")");
    s.compress.template check_communicator<Comm>();
    e.resize(s.name, s.size, total, control_.size(), s.pieces, s.in_flight_between_rounds, s.scratch, generation_);
    if (s.compress.active())
      e.codec_.configure(s.compress, static_cast<std::size_t>(comm_.size()), control_.size(), s.size, total, s.pieces);
    exchanges_.push_back(&e);
  }
  /// Posts e's non-blocking reduction; a compressed exchange sends its deviation from `reference`.
  template <class Context>
  void post(Exchange& e, Span reference, const Context& where) {
    check_idle(e, "post");
    if (e.compressed()) e.check_reference(reference);
    const ControlTag tag = write(e.model(), where, true);
    if (e.compressed())
      e.post_compressed(comm_, tag, control_.staging(), reference, static_cast<T>(where.weight()));
    else
      e.post(comm_, tag, control_.staging());
    ++collectives_;
  }
  /// Waits for e's reduction and reads its slots.
  template <class Context>
  void wait(Exchange& e, const Context& where) {
    if (!e.in_flight())
      throw std::logic_error("cocod: wait() on exchange '" + e.name_ + "', which has no collective in flight; post() it first");
    const auto c = e.wait(control_.staging());
    recorder_.awaited(where.step(), c.posted, c.done, c.t0, c.t1, e.bytes_sent());
    read(c.tag, where);
    normalize(e, e.compressed());
  }
  /// e's reduction, blocking (compressed as post() says; `exact`: the plain sum whatever e is).
  template <class Context>
  void reduce(Exchange& e, Span reference, bool exact, const Context& where) {
    check_idle(e, "reduce");
    const bool compressed = e.compressed() && !exact;
    if (compressed) e.check_reference(reference);
    const ControlTag tag = write(e.model(), where, true);
    const auto t0 = comm::Clock::now();
    if (compressed) {
      e.post_compressed(comm_, tag, control_.staging(), reference, static_cast<T>(where.weight()));
      (void)e.wait(control_.staging());
    } else {
      store(B{}, e.whole(), e.model_size(), std::span<const T>(control_.staging()));
      comm_.all_reduce(e.whole());
      load(B{}, e.whole(), e.model_size(), control_.staging());
    }
    recorder_.blocking(where.step(), t0, comm::Clock::now(), compressed ? e.bytes_sent()
                                                                       : Exchange::rank_share(comm_, Exchange::ring_bytes(e.whole().size(), comm_.size())));
    ++collectives_;
    read(tag, where);
    normalize(e, compressed);
  }
  /// The control slots alone, blocking: for a round in which the algorithm reduced nothing, so
  /// that losses, votes and the step check still reach every worker. No contribution travels,
  /// so nothing can be withheld: under NonFinite::raise a worker's finding ends the run here (the
  /// same NonFiniteError on every worker); under skip it waits for the next reduction of a
  /// contribution, which withholds it.
  template <class Context>
  void reduce_control(const Context& where) {
    const ControlTag tag = write(Span{}, where, guard_.raises());
    const auto t0 = comm::Clock::now();
    comm_.all_reduce(control_.staging());
    recorder_.blocking(where.step(), t0, comm::Clock::now(), Exchange::rank_share(comm_, Exchange::ring_bytes(control_.size(), comm_.size())));
    read(tag, where);
    if (tag.guarded && guard_.partial())
      guard_.fail("found by the round's control reduction (" + where.algorithm() +
                      " reduced no exchange in the round); the models are left as they are",
                  where.round(), where.step());
  }
  /// Throws std::logic_error, naming `what` and the exchange, unless e is prepared for this run
  /// and has no collective in flight.
  void check_idle(const Exchange& e, const char* what) const {
    if (e.generation_ != generation_)
      throw std::logic_error(std::string("cocod: ") + what + "() on exchange '" + e.name_ + "', which was not prepare()d for this run");
    if (e.in_flight())
      throw std::logic_error(std::string("cocod: ") + what + "() on exchange '" + e.name_ +
                             "', whose collective is in flight; wait() for it first");
  }
  /// Throws std::logic_error naming the exchange and the setting if a collective is in flight on
  /// an exchange that may have none between rounds (at a round's end).
  void check_round_end() const {
    for (const Exchange* e : exchanges_)
      if (e->in_flight() && !e->may_fly_)
        throw std::logic_error("cocod: exchange '" + e->name_ + "' is in flight at the end of a round: wait() for it in end_round, "
                               "or prepare it with .in_flight_between_rounds = true");
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
  // The slots of a reduction of `contribution`, which the guard checks first when `guarded` (a
  // NaN or an infinity never enters a reduction: it would reach every worker; it is withheld,
  // zeros sent). Unguarded, the guard's slots stay zero and its finding waits.
  template <class Context>
  ControlTag write(Span contribution, const Context& where, bool guarded) {
    const bool measured = where.write_window(control_.window_slots());
    const bool withheld = guarded && guard_.template withholds<B>(contribution, where.step());
    if (withheld && contribution.size() > 0) zero(B{}, contribution);
    const std::size_t loss_round = votes_.write(control_.vote_slots(), control_.step_slots(), where.weight(), !withheld,
                                                guard_.on(), where.rank(), where.step(), where.finishing());
    if (guarded)
      guard_.write(control_.guard_slots(), where.weight(), where.rank());
    else
      std::fill(control_.guard_slots().begin(), control_.guard_slots().end(), T(0));
    return ControlTag{loss_round, measured, withheld, guarded};
  }
  template <class Context>
  void read(ControlTag tag, const Context& where) {
    if (tag.guarded) guard_.read(std::span<const T>(control_.guard_slots()), tag.withheld);
    votes_.read(std::span<const T>(control_.vote_slots()), std::span<const T>(control_.step_slots()), tag.loss_round,
                tag.guarded ? guard_.kept_weight() : 1.0);
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
  std::size_t generation_ = 0;  // of the run: an exchange prepared for an earlier one is refused
};

}  // namespace cocod::detail
