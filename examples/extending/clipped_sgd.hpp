#pragma once
// A local update rule of one's own: SGD with each gradient element clipped to [-c, c], on the
// CPU backend (docs/extending.md).
#include <cocod.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <type_traits>

struct ClippedSgd {
  double clip = 1.0;  // its setting: cheap to copy, given to the algorithm after the options

  static constexpr const char* name = "ClippedSgd";  // in messages and checkpoints
  void validate() const {                            // at the algorithm's construction
    if (!(clip > 0.0)) cocod::invalid_setting("ClippedSgd", "clip", "must be > 0", clip);
  }
  template <class Archive>
  void serialize(Archive& a) {  // what a resumed run must share with the saved one
    a("clip", clip);
  }

  // The per-run state of one worker, created once the backend and scalar are known.
  template <class Backend, class T>
  struct State {
    T clip{};
    void apply(std::span<T> x, std::span<T> g, T lr) {
      for (std::size_t i = 0; i < x.size(); ++i) x[i] -= lr * std::clamp(g[i], -clip, clip);
    }
    template <class Archive>
    void serialize(Archive&) {}  // its run state for a checkpoint: none
  };
  template <class Backend, class T>
  [[nodiscard]] State<Backend, T> start(std::size_t) const {
    static_assert(std::is_same_v<Backend, cocod::backend::cpu>, "ClippedSgd runs on the CPU backend");
    return State<Backend, T>{static_cast<T>(clip)};
  }
};
