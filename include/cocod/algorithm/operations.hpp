#pragma once
// What an algorithm may do: the one narrow interface it receives in each of its hooks. Every
// reduction goes through it, so every one passes the non-finite guard, carries the control
// slots (losses, votes, the step check, an adaptive schedule's measurements) and is timed.
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "cocod/algorithm/exchange_spec.hpp"
#include "cocod/algorithm/reduced.hpp"
#include "cocod/family/compress.hpp"
#include "cocod/family/fragments.hpp"
#include "cocod/report.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/algorithm/detail/run.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod {

/// The operations an algorithm's hooks receive (docs/extending.md): the model's gradient, the
/// local update, the worker's weight, and the exchanges with their reductions. The types an
/// algorithm needs come with it: scalar_type (float or double), backend_type, span_type (the
/// parameters' span), exchange_type (a reduced buffer) and reduced_type (a reduction's result).
template <class Model, class Comm, class Schedule, class Update>
class Operations {
  using Run = detail::Run<Model, Comm, Schedule, Update>;
  using Calls = detail::ModelCalls<Model>;

 public:
  using scalar_type = typename Run::T;
  using backend_type = typename Run::B;
  using span_type = typename Run::Span;
  using exchange_type = detail::Exchange<typename Run::CommImpl, backend_type, scalar_type>;
  using reduced_type = Reduced<span_type>;

  Operations(Run& run, Model& model) noexcept : run_(run), model_(model) {}

  /// The model's gradient at its current parameters into g; returns the batch's mean loss. The
  /// first call in a step gives the step's loss (checked by the guard, counted in the round).
  double gradient(std::span<const std::size_t> batch, span_type g) {
    const double loss = Calls::loss_and_gradient(model_, batch, g);
    run_.gradient_computed(loss);
    return loss;
  }
  /// One local update of x with gradient g at learning rate lr (the Update's rule and state).
  void update(span_type x, span_type g, scalar_type lr) { run_.update_state().apply(x, g, lr); }
  /// w_i = M_i / sum_j M_j, this worker's weight in every average.
  [[nodiscard]] scalar_type weight() const noexcept { return static_cast<scalar_type>(run_.weight()); }
  /// True when the run's schedule measures compute and exchange times (schedule::Adaptive), so
  /// that info().hiding_steps is measured.
  static constexpr bool measuring = Run::measuring;
  /// True when this worker found a non-finite loss that no reduction has reported yet: its next
  /// contribution will be withheld (false when Options::non_finite is off).
  [[nodiscard]] bool found_non_finite() const noexcept { return run_.guard().found(); }
  /// Facts about the run (rank, workers, period, ...).
  [[nodiscard]] const RunInfo& info() const noexcept { return run_.loop().info(); }
  /// The steps taken in the current round before this one (0 in a round's first step).
  [[nodiscard]] std::size_t step_in_round() const noexcept { return run_.loop().pos().step_in_round; }
  /// The current round, counted from 0 at the run's first (a resumed run goes on counting): for
  /// a rule whose behaviour changes with the round (a warm-up, an exchange every other round).
  [[nodiscard]] std::size_t round() const noexcept { return run_.loop().pos().round; }

  /// Sizes exchange e for this run (in begin(), for every exchange the algorithm uses).
  void prepare(exchange_type& e, const ExchangeSpec& s) { run_.reducer().prepare(e, s); }
  /// Posts e's non-blocking all-reduce of its model part. A compressed exchange sends the model
  /// part's deviation from `reference` (the same piece of the outer model z on every worker,
  /// unchanged until wait()), and wait() leaves z + the decoded sum in it.
  void post(exchange_type& e, span_type reference = {}) { run_.reducer().post(e, reference, run_.context()); }
  /// Waits for e's all-reduce: its model part then holds the sum (for weighted contributions, the
  /// average). std::logic_error when nothing is in flight on e.
  [[nodiscard]] reduced_type wait(exchange_type& e) {
    run_.reducer().wait(e, run_.context());
    return result(e);
  }
  /// e's all-reduce, blocking (compressed as post() says).
  [[nodiscard]] reduced_type reduce(exchange_type& e, span_type reference = {}) {
    run_.reducer().reduce(e, reference, false, run_.context());
    return result(e);
  }
  /// x = sum_j w_j x_j through e (e's model part as long as x), blocking and exact (never
  /// compressed). A withheld contribution: x is the consensus of the finite ones, acknowledged.
  void average(span_type x, exchange_type& e) {
    run_.reducer().check_idle(e, "average");
    if (x.size() != e.model_size())
      throw std::logic_error("cocod: average() of " + std::to_string(x.size()) + " values through exchange '" + e.name() +
                             "', whose model part has " + std::to_string(e.model_size()));
    scale(backend_type{}, e.model(), x, weight());
    run_.reducer().reduce(e, span_type{}, true, run_.context());
    const reduced_type r = result(e);
    copy(backend_type{}, x, r.consensus());
    if (r.partial()) acknowledge(r, Recovery::restarted);
  }
  /// Says how the algorithm dealt with a partial result, which it must before its step ends:
  /// restarted (this worker's model now holds the consensus of the finite contributions, so its
  /// update state forgets a NaN it held) or kept. Then NonFinite::raise throws NonFiniteError on
  /// every worker, with `left` saying where the models are when the default does not; skip counts
  /// the skip (NonFiniteError after Options::max_skips in a row).
  void acknowledge(const reduced_type& r, Recovery how, const char* left = nullptr) {
    if (r.partial()) run_.acknowledge(r.ticket_, how == Recovery::restarted, r.own_, left);
  }

 private:
  reduced_type result(exchange_type& e) noexcept {
    return reduced_type(e.model(), run_.guard(), run_.loop().pos().round, run_.loop().pos().step);
  }
  Run& run_;
  Model& model_;
};

}  // namespace cocod
