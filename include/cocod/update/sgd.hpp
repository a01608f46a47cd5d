#pragma once
// The local update policy: SGD with momentum, Nesterov and weight decay (PyTorch semantics).
// Its state (the momentum buffer) is local to a worker and never averaged.
#include <cstddef>
#include <span>

#include "cocod/backend/backend.hpp"
#include "cocod/options.hpp"

namespace cocod::update {

/// SGD, optionally with momentum mu, Nesterov and weight decay lambda, read from cocod::Options:
///
///     d = g + lambda x;   v = mu v + d;   x = x - lr (Nesterov ? d + mu v : v)
///
/// with v = 0 before the first step (and no v at all when mu = 0: x = x - lr d).
struct Sgd {
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

  template <class Backend, class T>
  [[nodiscard]] State<Backend, T> start(const Options& o, std::size_t parameters) const {
    State<Backend, T> s;
    s.momentum = static_cast<T>(o.momentum);
    s.weight_decay = static_cast<T>(o.weight_decay);
    s.nesterov = o.nesterov;
    if (o.momentum > 0.0) s.velocity.resize(parameters);
    return s;
  }
};

}  // namespace cocod::update
