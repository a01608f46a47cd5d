#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/emitter.hpp is internal: include <cocod.hpp>"
#endif
// The run's events on their way to the user's sink (Trainer::on_event): each with the worker's
// rank, round and step, and its words.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <span>
#include <utility>

#include "cocod/algorithm/detail/loop.hpp"
#include "cocod/events.hpp"
#include "cocod/schedule/fixed.hpp"

namespace cocod::detail {

class Emitter {
 public:
  void set(EventSink sink) { sink_ = std::move(sink); }
  [[nodiscard]] bool on() const noexcept { return static_cast<bool>(sink_); }

  void emit(Event e, int rank, const Position& pos) const {
    if (!sink_) return;
    e.rank = rank;
    e.round = pos.round;
    e.step = pos.step;
    sink_(e);
  }
  /// A measuring schedule's new plan `b` replaced `a`, from everybody's measurements `m` (N
  /// seconds of compute per sample, then N seconds per exchange); nothing when it is the same.
  void replanned(const schedule::Plan& a, const schedule::Plan& b, std::span<const double> m, int rank, const Position& pos) const {
    if (!sink_ || (a.period == b.period && a.hiding_steps == b.hiding_steps && a.batch_size == b.batch_size)) return;
    const std::size_t n = m.size() / 2;
    Event e{.kind = Event::Kind::replanned, .old_period = a.period, .new_period = b.period, .old_hiding_steps = a.hiding_steps,
            .new_hiding_steps = b.hiding_steps, .old_batch_size = a.batch_size, .new_batch_size = b.batch_size};
    for (std::size_t j = 0; j < n; ++j) {
      e.sample_s = std::max(e.sample_s, m[j]);
      e.exchange_s = j == 0 ? m[n] : std::min(e.exchange_s, m[n + j]);
    }
    char text[320];
    std::snprintf(text, sizeof text,
                  "replanned: period %zu -> %zu, hiding steps %zu -> %zu, batch %zu -> %zu (measured: one exchange %.3f ms, "
                  "%.4f ms of compute per sample on the slowest worker)",
                  a.period, b.period, a.hiding_steps, b.hiding_steps, a.batch_size, b.batch_size, 1e3 * e.exchange_s, 1e3 * e.sample_s);
    e.message = text;
    emit(std::move(e), rank, pos);
  }

 private:
  EventSink sink_;
};

}  // namespace cocod::detail
