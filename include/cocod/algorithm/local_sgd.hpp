#pragma once
// Local-SGD: k local steps, then a blocking average of the models.
#include <cstddef>
#include <optional>
#include <span>
#include <tuple>

#include "cocod/algorithm/trainer.hpp"
#include "cocod/family/compress.hpp"
#include "cocod/family/outer.hpp"

namespace cocod {
namespace rules {

/// Local-SGD's rule (periodic model averaging, PR-SGD). Each round:
///
///     k local steps on x_i;   x_i = sum_j w_j x_j   (blocking all-reduce)
///
/// Momentum stays local. With an Outer optimizer (SlowMo, DiLoCo) the average moves an outer
/// model z that every worker then starts from:
///
///     xbar = sum_j w_j x_j;  z = outer(z, z - xbar);  x_i = z
///
/// and with Compress the average is taken of deviations from z, with error feedback
/// (docs/algorithm.md).
template <class Ops>
class LocalSGD {
  using T = typename Ops::scalar_type;
  using B = typename Ops::backend_type;
  using Span = typename Ops::span_type;

 public:
  static constexpr const char* name = "Local-SGD";
  using settings = std::tuple<std::optional<Outer>, Compress>;
  explicit LocalSGD(const settings& s) : outer_rule_(std::get<0>(s)), compress_(std::get<1>(s)) {}

  void begin(Ops& ops, Span x) {
    const std::size_t n = x.size();
    gradient_.resize(n);
    ops.prepare(send_, {.name = "send", .size = n, .compress = compress_, .scratch = true});
    family_ = outer_rule_ || compress_.active();
    averaged_ = true;
    if (!family_) return;
    outer_.allocate(n, outer_rule_, 1);
    outer_.start(x);
  }
  void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr) {
    ops.gradient(batch, gradient_.span());
    ops.update(x, gradient_.span(), lr);
    averaged_ = false;
  }
  void end_round(Ops& ops, Span x) {
    if (family_)
      outer_round(ops, x);
    else
      ops.average(x, send_);
    averaged_ = true;
  }
  void finish(Ops& ops, Span x) {  // a partial round: the exact consensus, with no outer step
    if (!averaged_) ops.average(x, send_);
  }
  template <class Archive>
  void serialize(Archive& a) {
    a("averaged", averaged_);
    if (family_) outer_.serialize(a);
  }
  // A new elastic epoch keeps the outer optimizer's momentum; z starts at the consensus.
  template <class Archive>
  void serialize_carried(Archive& a) {
    if (family_) outer_.serialize_carried(a);
  }

 private:
  // xbar (compressed: z + the decoded sum of the deviations); z = outer(z, z - xbar); x = z. A
  // partial average: no outer step, z = x = the consensus of the finite contributions.
  void outer_round(Ops& ops, Span x) {
    scale(B{}, send_.model(), x, ops.weight());
    const auto r = ops.reduce(send_, outer_.z());
    const Piece whole{0, x.size(), 0};
    if (r.partial())
      copy(B{}, outer_.z(), r.consensus());
    else
      outer_.step(whole, send_.model());
    copy(B{}, x, outer_.z());
    ops.acknowledge(r, Recovery::restarted);
  }

  std::optional<Outer> outer_rule_;
  Compress compress_;
  backend::buffer<B, T> gradient_;
  typename Ops::exchange_type send_;
  detail::OuterModel<B, T> outer_;  // with an outer optimizer or compression
  bool family_ = false;
  bool averaged_ = true;
};

}  // namespace rules

/// Local-SGD: k local steps, then a blocking average of the models (rules::LocalSGD). It takes
/// the family's Outer (SlowMo, DiLoCo) and Compress; template parameters as cocod::CoCoDSGD.
template <class Model, class Comm, class Schedule = schedule::Fixed<>, class Update = update::Sgd>
using LocalSGD = Trainer<rules::LocalSGD, Model, Comm, Schedule, Update>;

}  // namespace cocod
