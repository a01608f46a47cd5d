#pragma once
// Gradient clipping by the global norm, as a wrapper of any local update rule: the gradient is
// scaled down to max_norm before the wrapped rule sees it (PyTorch's clip_grad_norm_ followed by
// the optimizer's step).
#include <cmath>
#include <cstddef>
#include <string>

#include "cocod/backend/backend.hpp"
#include "cocod/errors.hpp"
#include "cocod/update/sgd.hpp"

namespace cocod::update {

/// `Inner` (update::Sgd, update::Adam, update::AdamW, or a rule of your own) on a gradient whose
/// global L2 norm is at most max_norm:
///
///     n = ||g||_2;   g = g * max_norm / (n + 1e-6)   when that factor is below 1
///
/// the norm being that of the whole gradient of one worker's step (the workers' average under
/// S-SGD, where the update sees the averaged gradient). A gradient with a NaN is left as it is, for
/// the non-finite guard to find; a finite one whose squares overflow is clipped all the same. The DiLoCo recipe:
/// `cocod::update::ClipGradNorm<cocod::update::AdamW>{.max_norm = 1.0, .inner = {.weight_decay = 0.1}}`.
///
/// | field    | meaning                              | default |
/// |----------|--------------------------------------|---------|
/// | max_norm | the largest global norm, > 0         | 1       |
/// | inner    | the wrapped update rule and its settings | `Inner{}` |
template <class Inner = Sgd>
struct ClipGradNorm {
  double max_norm = 1.0;
  Inner inner{};

  static constexpr const char* name = "update::ClipGradNorm";
  /// Throws std::invalid_argument naming the field that breaks its rule (the inner rule's own
  /// fields are named by its type).
  void validate() const {
    if (!(max_norm > 0.0) || !std::isfinite(max_norm))
      invalid_setting("cocod::update::ClipGradNorm", "max_norm", "must be a finite number > 0", max_norm);
    if constexpr (requires { inner.validate(); }) inner.validate();
  }
  /// The settings a resumed run must share with the saved one: max_norm, the inner rule's name
  /// and its settings.
  template <class Archive>
  void serialize(Archive& a) {
    a("max_norm", max_norm);
    std::string rule = inner_name();
    a("inner", rule);
    if constexpr (requires { inner.serialize(a); }) inner.serialize(a);
  }
  [[nodiscard]] static std::string inner_name() {
    if constexpr (requires { Inner::name; }) return Inner::name;
    else return "an update without a name";
  }

  /// Per-run state: the inner rule's.
  template <class Backend, class T>
  struct State {
    typename Inner::template State<Backend, T> inner;
    T max_norm{};

    /// Clips g in place, then applies the inner rule's step.
    template <class Span>
    void apply(Span x, Span g, T lr) {
      T norm = std::sqrt(squared_norm(Backend{}, g));
      if (std::isinf(norm) && all_finite(Backend{}, g)) {
        // the squares of a finite gradient overflowed T: scale by 2^-64 (exactly) and measure
        // again; the norm of what is left is far above max_norm
        scale(Backend{}, g, g, T(0x1p-64));
        norm = std::sqrt(squared_norm(Backend{}, g));
        scale(Backend{}, g, g, max_norm / norm);
      } else if (const T factor = max_norm / (norm + T(1e-6)); factor < T(1)) {
        scale(Backend{}, g, g, factor);
      }
      inner.apply(x, g, lr);
    }
    void reset() {
      if constexpr (requires { inner.reset(); }) inner.reset();
    }
    template <class Archive>
    void serialize(Archive& a) {
      if constexpr (requires { inner.serialize(a); }) inner.serialize(a);
    }
  };

  /// The state of one worker for n parameters, at begin().
  template <class Backend, class T>
  [[nodiscard]] State<Backend, T> start(std::size_t parameters) const {
    return {inner.template start<Backend, T>(parameters), static_cast<T>(max_norm)};
  }
};

}  // namespace cocod::update
