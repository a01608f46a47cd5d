#pragma once
// Callbacks are detected at compile time: only the hooks a callback defines are called, and a
// hook that returns bool can ask the run to stop (true = stop).
//   on_begin(const RunInfo&)   on_step(const StepInfo&)   on_round(const RoundStats&)
//   on_end(const Report&)
#include <concepts>
#include <cstddef>

#include "cocod/report.hpp"

namespace cocod {

/// What on_step sees.
struct StepInfo {
  std::size_t step = 0;        ///< global step index
  double loss = 0.0;           ///< this worker's mini-batch loss
  double learning_rate = 0.0;
};

namespace callbacks::hooks {
template <class C, class Arg>
concept stops_on_step = requires(C& c, const Arg& a) { { c.on_step(a) } -> std::same_as<bool>; };
template <class C, class Arg>
concept stops_on_round = requires(C& c, const Arg& a) { { c.on_round(a) } -> std::same_as<bool>; };

template <class C>
void begin(C& c, const RunInfo& info) {
  if constexpr (requires { c.on_begin(info); }) c.on_begin(info);
}
template <class C>
bool step(C& c, const StepInfo& s) {
  if constexpr (stops_on_step<C, StepInfo>)
    return c.on_step(s);
  else if constexpr (requires { c.on_step(s); })
    c.on_step(s);
  return false;
}
template <class C>
bool round(C& c, const RoundStats& s) {
  if constexpr (stops_on_round<C, RoundStats>)
    return c.on_round(s);
  else if constexpr (requires { c.on_round(s); })
    c.on_round(s);
  return false;
}
/// after_round(const RoundStats&): after every callback's on_round and the stop votes they
/// asked for (callbacks::Checkpoint saves there, so that a checkpoint holds those votes).
template <class C>
void after_round(C& c, const RoundStats& s) {
  if constexpr (requires { c.after_round(s); }) c.after_round(s);
}
template <class C>
void end(C& c, const Report& r) {
  if constexpr (requires { c.on_end(r); }) c.on_end(r);
}
}  // namespace callbacks::hooks
}  // namespace cocod
