#pragma once
// The outer optimizer of the model-averaging family (SlowMo, DiLoCo): its settings, and the outer
// model z that every worker holds identically with the outer momentum, stepped per fragment.
// Without an outer optimizer (the identity) z is the latest average.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <vector>

#include "cocod/backend/backend.hpp"
#include "cocod/errors.hpp"
#include "cocod/family/fragments.hpp"

namespace cocod {

/// SGD with momentum or Nesterov (PyTorch semantics) on each round's pseudo-gradient
/// Delta = z - xbar, the outer model z minus the round's average:
///
///     b = Delta (first step), b = momentum * b + Delta (after);  z = z - learning_rate * g,
///     g = Delta + momentum * b (nesterov) or b
///
/// Local-SGD with it is SlowMo / DiLoCo; CoCoD-SGD applies it to its one-round-stale average
/// and keeps each worker's progress since its snapshot (docs/algorithm.md).
///
/// | field         | meaning                              | default |
/// |---------------|--------------------------------------|---------|
/// | learning_rate | eta > 0                              | 1       |
/// | momentum      | beta in [0, 1)                       | 0       |
/// | nesterov      | Nesterov's step (needs momentum > 0) | false   |
struct Outer {
  double learning_rate = 1.0;
  double momentum = 0.0;
  bool nesterov = false;

  /// DiLoCo's setting: eta 0.7, beta 0.9, Nesterov.
  [[nodiscard]] static Outer diloco() noexcept { return {0.7, 0.9, true}; }
  /// SlowMo's default: eta 1, beta 0.5, heavy ball.
  [[nodiscard]] static Outer slowmo() noexcept { return {1.0, 0.5, false}; }

  /// The name in messages and checkpoints.
  static constexpr const char* name = "Outer";
  /// Throws std::invalid_argument naming the field that breaks its rule.
  void validate() const {
    if (!(learning_rate > 0.0) || !std::isfinite(learning_rate))
      invalid_setting("cocod::Outer", "learning_rate", "must be a finite number > 0", learning_rate);
    if (!(momentum >= 0.0 && momentum < 1.0)) invalid_setting("cocod::Outer", "momentum", "must be in [0, 1)", momentum);
    if (nesterov && momentum == 0.0) invalid_setting("cocod::Outer", "nesterov", "needs momentum > 0", "nesterov = true, momentum = 0");
  }
  /// The fields a resumed run must share with the saved one.
  template <class Archive>
  void serialize(Archive& a) {
    a("learning_rate", learning_rate);
    a("momentum", momentum);
    a("nesterov", nesterov);
  }
};

namespace backend {
namespace passes {
/// One outer optimizer step on one parameter, as every pass takes it (PyTorch SGD semantics).
template <class T>
struct OuterMove {
  T eta, beta;
  bool nesterov;
  /// z = outer(z, delta) with momentum slot b (unused, may be null, when beta = 0).
  COCOD_HOST_DEVICE void operator()(T& z, T* b, T delta, bool first) const {
    if (beta == T(0)) {
      z -= eta * delta;
      return;
    }
    *b = first ? delta : beta * *b + delta;
    z -= eta * (nesterov ? delta + beta * *b : *b);
  }
};
template <class T>
struct OuterStep {
  T* z;
  const T* abar;
  T* b;
  OuterMove<T> outer;
  bool first;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    outer(z[i], outer.beta == T(0) ? nullptr : b + i, z[i] - abar[i], first);
  }
};
}  // namespace passes

/// The outer optimizer's step on Delta = z - abar:
///   beta = 0:  z = z - eta * Delta                              (`b` unused, may be empty)
///   else:      b = Delta (first step) or beta * b + Delta;  z = z - eta * (Delta + beta * b)
///              (Nesterov) or z - eta * b (heavy ball).
template <class B, class S>
void outer_step(B backend, S z, read_only_t<S> abar, S b, element_t<S> eta, element_t<S> beta, bool nesterov, bool first) {
  for_each_index(backend, z.size(), passes::OuterStep<element_t<S>>{z.data(), abar.data(), b.data(), {eta, beta, nesterov}, first});
}
}  // namespace backend

namespace detail {

/// The outer model z (on the model's backend) and, with an outer optimizer that has momentum,
/// its momentum b; each fragment takes its own first step.
template <class B, class T>
class OuterModel {
 public:
  using Span = typename backend::buffer<B, T>::span_type;

  /// Room for n parameters in `fragments` pieces; `rule` none: the identity.
  void allocate(std::size_t n, const std::optional<Outer>& rule, std::size_t fragments) {
    rule_ = rule;
    z_.resize(n);
    momentum_.resize(rule && rule->momentum > 0.0 ? n : 0);
    stepped_.assign(fragments, 0);
  }
  /// z = x (rank 0's model, the same on every worker), no outer step taken yet.
  void start(Span x) {
    copy(B{}, z_.span(), x);
    std::fill(stepped_.begin(), stepped_.end(), 0);
  }
  [[nodiscard]] Span z() noexcept { return z_.span(); }
  [[nodiscard]] Span z(const Piece& p) noexcept { return z_.span().subspan(p.offset, p.size); }

  /// The round's outer step on piece p from its average abar: z = outer(z, z - abar); the
  /// identity: z = abar.
  void step(const Piece& p, Span abar) {
    Span z = this->z(p);
    if (!rule_) return copy(B{}, z, abar);
    Span b = momentum_.size() > 0 ? momentum_.span().subspan(p.offset, p.size) : Span{};
    outer_step(B{}, z, abar, b, static_cast<T>(rule_->learning_rate), static_cast<T>(rule_->momentum), rule_->nesterov,
               stepped_[p.index] == 0);
    stepped_[p.index] = 1;
  }

  template <class Archive>
  void serialize(Archive& a) {
    a("z", z_);
    serialize_carried(a);
  }
  /// What a new elastic epoch keeps: the momentum (every worker's alike) and which fragments
  /// stepped; z starts again at the epoch's consensus.
  template <class Archive>
  void serialize_carried(Archive& a) {
    const std::size_t fragments = stepped_.size();
    a("momentum", momentum_);
    a("stepped", stepped_);
    if constexpr (!Archive::saving)
      if (stepped_.size() != fragments) a.fail("stepped", "does not have one entry per fragment (corrupt)");
  }

 private:
  std::optional<Outer> rule_;
  backend::buffer<B, T> z_, momentum_;
  std::vector<unsigned char> stepped_;  // per fragment: an outer step was taken (PyTorch's first-step buffer)
};

}  // namespace detail
}  // namespace cocod
