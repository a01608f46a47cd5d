#pragma once
// Local-SGD: k local steps, then a blocking average of the models.
#include "cocod/algorithm/trainer.hpp"

namespace cocod {

/// Local-SGD (periodic model averaging, PR-SGD). Each round:
///
///     k local steps on x_i;   x_i = sum_j w_j x_j   (blocking all-reduce)
///
/// Momentum stays local. With an outer optimizer (Options::outer: SlowMo, DiLoCo) the average
/// moves an outer model z that every worker then starts from:
///
///     xbar = sum_j w_j x_j;  z = outer(z, z - xbar);  x_i = z
///
/// and with Options::compress the average is taken of deviations from z, with error feedback
/// (docs/algorithm.md). Template parameters as cocod::Optimizer.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
class LocalSGD : public Trainer<LocalSGD<Model, Comm, Schedule, Update>, Model, Comm, Schedule, Update> {
  using Base = Trainer<LocalSGD, Model, Comm, Schedule, Update>;
  friend Base;
  using typename Base::T, typename Base::B, typename Base::Span, typename Base::Exchange;

 public:
  static constexpr const char* name = "Local-SGD";
  using Base::Base;

 private:
  static constexpr detail::Accepts accepts{.outer = true, .compress = true};

  void allocate(std::size_t n) {
    gradient_.resize(n);
    this->prepare(send_, n, n, 1);
    const Options& o = this->options_;
    family_ = o.outer.has_value() || o.compress != Compression::none;
    if (family_) outer_.allocate(n, o.outer, 1);
  }
  void start(Span x) {
    averaged_ = true;
    if (family_) outer_.start(x);
  }
  double compute(Model& model, Span x, std::span<const std::size_t> batch, T lr) {
    const double loss = this->gradient(model, batch, gradient_.span());
    this->update(x, gradient_.span(), lr);
    averaged_ = false;
    return loss;
  }
  void end_round(Span x) {
    if (family_)
      outer_round(x);
    else
      this->average(x, send_);
    averaged_ = true;
  }
  void finish_run(Span x) {  // a partial round: the exact consensus, with no outer step
    if (!averaged_) this->average(x, send_);
  }
  // xbar (compressed: z + the decoded sum of the deviations); z = outer(z, z - xbar); x = z. A
  // withheld contribution: no outer step, z = x = the consensus of the finite contributions.
  void outer_round(Span x) {
    scale(B{}, send_.model(), x, this->weight());
    this->reduce(send_, outer_.z());
    const bool incomplete = this->withheld();
    if (incomplete) {
      this->keep_finite(send_, outer_.z());
      copy(B{}, outer_.z(), send_.model());
    } else {
      outer_.step(0, send_.model());
    }
    copy(B{}, x, outer_.z());
    if (incomplete) this->non_finite(true);
  }
  template <class Archive>
  void serialize(Archive& a) {
    a("averaged", averaged_);
    if (family_) outer_.serialize(a);
    if constexpr (!Archive::saving)
      if (send_.in_flight())
        a.fail("", "does not fit section 'exchange.0', which holds a collective in flight: " + std::string(name) +
                       " has none between rounds (corrupt)");
  }

  backend::buffer<B, T> gradient_;
  Exchange send_;
  detail::OuterModel<B, T> outer_;  // with an outer optimizer or compression
  bool family_ = false;
  bool averaged_ = true;
};

}  // namespace cocod
