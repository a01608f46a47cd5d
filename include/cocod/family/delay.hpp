#pragma once
// DiLoCo with delayed outer gradients: how a worker starts each round while the average of the
// last round's progress is still in flight, and the passes of its rule (cocod::DelayedDiLoCo).
#include <cstddef>

#include "cocod/backend/backend.hpp"
#include "cocod/errors.hpp"
#include "cocod/family/outer.hpp"

namespace cocod {

/// Where a worker of cocod::DelayedDiLoCo starts each round.
enum class OuterStart {
  eager,    ///< from its own outer step on the estimate Pbar(r-1) + w_i (P_i(r) - P_i(r-1)) (Kale et al.)
  delayed,  ///< from the shared outer model, one round behind (the naive delay, the control)
};

/// "eager" or "delayed".
[[nodiscard]] inline const char* to_string(OuterStart s) noexcept { return s == OuterStart::delayed ? "delayed" : "eager"; }

/// DiLoCo with delayed outer gradients (Kale, Douillard and Donchev 2025): each round's progress
/// is averaged while the next round runs and moves the shared outer model one round late.
///
/// | field | meaning                                                              | default |
/// |-------|----------------------------------------------------------------------|---------|
/// | start | eager: each worker's own outer step on its estimate of the average;  | eager   |
/// |       | delayed: the shared outer model, one round behind                    |         |
struct Delay {
  OuterStart start = OuterStart::eager;

  /// The name in messages and checkpoints.
  static constexpr const char* name = "Delay";
  /// Throws std::invalid_argument naming the field that breaks its rule.
  void validate() const {
    if (start != OuterStart::eager && start != OuterStart::delayed)
      invalid_setting("cocod::Delay", "start", "must be OuterStart::eager or OuterStart::delayed", static_cast<int>(start));
  }
  /// The fields a resumed run must share with the saved one.
  template <class Archive>
  void serialize(Archive& a) {
    a("start", start);
  }
};

// The passes of cocod::DelayedDiLoCo's rule: a landing, the two restarts, a consensus share, the
// final progress.
namespace backend {
namespace passes {
template <class T>
struct DelayedLanding {
  T* z;
  T* b;
  T* others;  // null for the delayed start
  const T* pbar;
  OuterMove<T> outer;
  bool first;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    outer(z[i], b ? b + i : nullptr, -pbar[i], first);
    if (others) others[i] += pbar[i];
  }
};
template <class T>
struct DelayedRestart {
  T* x;
  T* start;
  T* send;
  const T* z;
  T w;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    send[i] = w * (x[i] - start[i]);
    start[i] = z[i];
    x[i] = z[i];
  }
};
template <class T>
struct EagerRestart {
  T* x;
  T* start;
  T* b;
  T* others;
  T* send;
  OuterMove<T> outer;
  T w;
  bool first;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    const T sent = w * (x[i] - start[i]);
    outer(start[i], b ? b + i : nullptr, -(others[i] + sent), first);
    others[i] = -sent;
    send[i] = sent;
    x[i] = start[i];
  }
};
// A worker's share of the consensus between rounds: z + (x - s), where on the piece whose post
// is pending z is stepped on send_i / w_i (w_i its current weight) as if it were the average.
// The outer step is affine in the average it steps on, so sum_j w_j share_j is
// outer(z, b, -sum_j send_j) + sum_j w_j (x_j - s_j): the model finish() returns (with
// compression, up to what the exchange will decode; not for a contribution that is withheld).
template <class T>
struct ConsensusShare {
  T* out;
  const T* x;
  const T* start;
  const T* z;
  const T* b;     // null without outer momentum
  const T* send;  // the pending piece's w_i P_i, indexed from `lo` (null: nothing pending)
  std::size_t lo, hi;
  OuterMove<T> outer;
  T w;
  bool first;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const {
    T zi = z[i];
    if (send && i >= lo && i < hi) {
      T bi = b ? b[i] : T(0);
      outer(zi, b ? &bi : nullptr, -(send[i - lo] / w), first);
    }
    out[i] = zi + (x[i] - start[i]);
  }
};
template <class T>
struct Progress {
  T* x;
  const T* start;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const { x[i] = x[i] - start[i]; }
};
template <class T>
struct Plus {
  T* x;
  const T* z;
  COCOD_HOST_DEVICE void operator()(std::size_t i) const { x[i] = z[i] + x[i]; }
};
}  // namespace passes
}  // namespace backend

}  // namespace cocod
