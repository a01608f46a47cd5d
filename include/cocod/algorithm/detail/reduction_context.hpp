#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/reduction_context.hpp is internal: include <cocod.hpp>"
#endif
// What the reducer asks of the run at each reduction: this worker's weight, rank and step for
// the control slots, the measurement window whose slots travel with them, and the algorithm's
// name and round for its messages.
#include <cstddef>
#include <span>
#include <string>

#include "cocod/algorithm/detail/loop.hpp"
#include "cocod/options.hpp"
#include "cocod/schedule/measurement.hpp"

namespace cocod::detail {

template <class Schedule, class T>
struct ReductionContext {
  const Loop& loop;
  schedule::Window<Schedule>& window;
  const Schedule& schedule;
  const Options& options;

  [[nodiscard]] double weight() const noexcept { return loop.info().weight; }
  [[nodiscard]] std::size_t rank() const noexcept { return static_cast<std::size_t>(loop.info().rank); }
  [[nodiscard]] std::size_t step() const noexcept { return loop.pos().step; }
  [[nodiscard]] bool finishing() const noexcept { return loop.pos().finishing; }
  [[nodiscard]] std::size_t round() const noexcept { return loop.pos().round; }
  [[nodiscard]] const std::string& algorithm() const noexcept { return loop.info().algorithm; }
  [[nodiscard]] bool write_window(std::span<T> slots) const noexcept { return window.write(slots, loop.info().rank); }
  void read_window(std::span<const T> slots) const {
    const RunInfo& i = loop.info();
    window.read(slots, schedule, options, i.rank, i.workers, i.total_batch, loop.plan());
  }
};

}  // namespace cocod::detail
