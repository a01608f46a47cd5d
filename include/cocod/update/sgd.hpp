#pragma once
// The local update policy: SGD with momentum, Nesterov and weight decay (PyTorch semantics). It
// owns its settings; its state (the momentum buffer) is local to a worker and never averaged.
#include <cmath>
#include <cstddef>
#include <span>
#include <type_traits>

#include "cocod/backend/backend.hpp"
#include "cocod/errors.hpp"

namespace cocod {
namespace backend {
namespace passes {
/// The rules of one local step, picked at compile time (no branch per element).
enum class SgdRule { sgd, sgd_wd, momentum, momentum_wd, nesterov, nesterov_wd };
template <class T, SgdRule R>
struct LocalUpdate {
  T* x;
  const T* g;
  T* v;
  T lr, mu, lambda;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    if constexpr (R == SgdRule::sgd) {
      x[i] -= lr * g[i];
    } else if constexpr (R == SgdRule::sgd_wd) {
      x[i] -= lr * (g[i] + lambda * x[i]);
    } else if constexpr (R == SgdRule::momentum) {
      v[i] = mu * v[i] + g[i];
      x[i] -= lr * v[i];
    } else if constexpr (R == SgdRule::momentum_wd) {
      v[i] = mu * v[i] + (g[i] + lambda * x[i]);
      x[i] -= lr * v[i];
    } else if constexpr (R == SgdRule::nesterov) {
      v[i] = mu * v[i] + g[i];
      x[i] -= lr * (g[i] + mu * v[i]);
    } else {
      const T d = g[i] + lambda * x[i];
      v[i] = mu * v[i] + d;
      x[i] -= lr * (d + mu * v[i]);
    }
  }
};
}  // namespace passes

/// One local update step, PyTorch's SGD semantics:
///   d = g + lambda*x;  v = mu*v + d (if mu > 0);  d = d + mu*v (Nesterov) or v;  x = x - lr*d.
/// `velocity` is empty when mu = 0. Each special case evaluates exactly the written formula
/// (no `+ 0*x` when lambda = 0), so plain SGD is bitwise `x - lr*g`.
template <class B, class S>
void local_update(B b, S x, read_only_t<S> g, S velocity, element_t<S> lr, element_t<S> mu, element_t<S> lambda,
                  bool nesterov) {
  using T = element_t<S>;
  using passes::SgdRule;
  auto run = [&](auto rule) {
    for_each_index(b, x.size(), passes::LocalUpdate<T, decltype(rule)::value>{x.data(), g.data(), velocity.data(), lr, mu, lambda});
  };
  if (mu == T(0))
    lambda == T(0) ? run(std::integral_constant<SgdRule, SgdRule::sgd>{}) : run(std::integral_constant<SgdRule, SgdRule::sgd_wd>{});
  else if (!nesterov)
    lambda == T(0) ? run(std::integral_constant<SgdRule, SgdRule::momentum>{})
                   : run(std::integral_constant<SgdRule, SgdRule::momentum_wd>{});
  else
    lambda == T(0) ? run(std::integral_constant<SgdRule, SgdRule::nesterov>{})
                   : run(std::integral_constant<SgdRule, SgdRule::nesterov_wd>{});
}
}  // namespace backend

namespace update {

/// SGD, optionally with momentum mu, Nesterov and weight decay lambda:
///
///     d = g + lambda x;   v = mu v + d;   x = x - lr (Nesterov ? d + mu v : v)
///
/// with v = 0 before the first step (and no v at all when mu = 0: x = x - lr d). Give it to an
/// algorithm with the options: `cocod::CoCoDSGD<M, C> opt{comm, options, cocod::update::Sgd{.momentum = 0.9}}`.
///
/// | field        | meaning                                             | default |
/// |--------------|-----------------------------------------------------|---------|
/// | momentum     | heavy-ball coefficient mu in [0, 1), local to each worker | 0 |
/// | nesterov     | Nesterov momentum (needs momentum > 0)              | false   |
/// | weight_decay | L2 coefficient lambda >= 0, added to the gradient   | 0       |
struct Sgd {
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;

  /// The name in messages and checkpoints.
  static constexpr const char* name = "update::Sgd";
  /// Throws std::invalid_argument naming the field that breaks its rule.
  void validate() const {
    if (!(momentum >= 0.0 && momentum < 1.0)) invalid_setting("cocod::update::Sgd", "momentum", "must be in [0, 1)", momentum);
    if (nesterov && momentum == 0.0)
      invalid_setting("cocod::update::Sgd", "nesterov", "needs momentum > 0", "nesterov = true, momentum = 0");
    if (!(weight_decay >= 0.0) || !std::isfinite(weight_decay))
      invalid_setting("cocod::update::Sgd", "weight_decay", "must be a finite number >= 0", weight_decay);
  }
  /// The settings a resumed run must share with the saved one.
  template <class Archive>
  void serialize(Archive& a) {
    a("momentum", momentum);
    a("nesterov", nesterov);
    a("weight_decay", weight_decay);
  }

  /// Per-run state: the momentum buffer of one worker, on the model's backend.
  template <class Backend, class T>
  struct State {
    backend::buffer<Backend, T> velocity;
    T momentum{};
    T weight_decay{};
    bool nesterov = false;

    /// Applies one step with gradient g at learning rate lr (spans of the backend's memory).
    template <class Span>
    void apply(Span x, Span g, T lr) {
      local_update(Backend{}, x, g, velocity.span(), lr, momentum, weight_decay, nesterov);
    }
    /// Forgets the momentum (after this worker's state was replaced by a consensus).
    void reset() {
      if (velocity.size() > 0) zero(Backend{}, velocity.span());
    }
    /// Run state for a checkpoint: the momentum buffer (empty without momentum).
    template <class Archive>
    void serialize(Archive& a) {
      a("velocity", velocity);
    }
  };

  /// The state of one worker for n parameters, at begin().
  template <class Backend, class T>
  [[nodiscard]] State<Backend, T> start(std::size_t parameters) const {
    State<Backend, T> s;
    s.momentum = static_cast<T>(momentum);
    s.weight_decay = static_cast<T>(weight_decay);
    s.nesterov = nesterov;
    if (momentum > 0.0) s.velocity.resize(parameters);
    return s;
  }
};

}  // namespace update
}  // namespace cocod
