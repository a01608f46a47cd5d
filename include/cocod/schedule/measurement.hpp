#pragma once
// The measurement window of a schedule that re-plans from measured times (schedule::Adaptive):
// what this worker measured since the last re-plan, the slots that carry it to every worker in
// a reduced buffer, and the plan that the gathered measurements give. A schedule that does not
// measure gets an empty window that occupies no slot.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "cocod/options.hpp"
#include "cocod/schedule/fixed.hpp"

namespace cocod::schedule {

/// What every worker measured over a window of rounds, gathered in the control slots of a
/// reduced buffer, so that every worker holds the same values (indexed by rank).
struct Measured {
  std::span<const double> seconds_per_sample;     ///< compute time of one sample on worker j
  /// one all-reduce, from post to completion, on worker j: the window's mean plus the schedule's
  /// margin of standard deviations between its rounds (Adaptive::margin)
  std::span<const double> seconds_per_collective;
};

/// A schedule that re-plans from measurements: it says at which rounds a window closes, and
/// the plan that everybody's measurements give.
template <class S>
concept measuring_schedule = requires(const S& s, const Options& o, const Plan& p, const Measured& m,
                                      std::size_t round, std::size_t total_batch) {
  { s.window_closes(round) } -> std::same_as<bool>;
  { s.replan(o, 0, 1, total_batch, p, m) } -> std::same_as<Plan>;
};

/// One round as the window sees it.
struct RoundSample {
  std::size_t round = 0;        ///< the round's index (round 0 includes start-up: not measured)
  double compute_s = 0.0;       ///< its compute time
  double samples = 0.0;         ///< samples it computed (steps x batch size)
  double comm_s = 0.0;          ///< its communication time, post to completion
  std::size_t collectives = 0;  ///< collectives completed in it
};

/// The window of a schedule that does not measure: no slots, no plan changes.
template <class Schedule>
class Window {
 public:
  void start(int) {}
  [[nodiscard]] static constexpr std::size_t slots() noexcept { return 0; }
  void add(const Schedule&, const RoundSample&) noexcept {}
  template <class T>
  [[nodiscard]] bool write(std::span<T>, int) noexcept { return false; }
  template <class T>
  void read(std::span<const T>, const Schedule&, const Options&, int, int, std::size_t, const Plan&) noexcept {}
  [[nodiscard]] bool take(Plan&) noexcept { return false; }
  [[nodiscard]] std::span<const double> measured() const noexcept { return {}; }
  template <class Archive>
  void serialize(Archive&) noexcept {}  // nothing measured, nothing to keep
};

/// The window of a measuring schedule. Each worker fills only its own entries of 2N slots,
/// [seconds per sample of worker 0..N-1, seconds per all-reduce of worker 0..N-1], and leaves the
/// others 0: the reduction's sum hands everybody the same measurements, from which every worker
/// computes the same plan, applied by all at the same round boundary. Allocates only in start().
template <measuring_schedule Schedule>
class Window<Schedule> {
 public:
  /// What the window holds between rounds (all of it run state).
  struct Sums {
    double compute_s = 0.0, samples = 0.0, comm_s = 0.0;  ///< the open window's sums
    std::size_t collectives = 0;
    double round_collective_s = 0.0, round_collective_sq = 0.0;  ///< sums of each round's mean all-reduce time, and of its square
    std::size_t rounds = 0;                                      ///< rounds with a collective
    double ready_sample_s = 0.0, ready_collective_s = 0.0;  ///< a closed window, not yet sent
    bool ready = false;
    bool pending = false;  ///< `plan` is in force from the next round boundary
    Plan plan{};
    std::vector<double> measured;  ///< everybody's measurements, from the slots
  };

  void start(int workers) {
    s_ = Sums{};
    s_.measured.assign(2 * static_cast<std::size_t>(workers), 0.0);
  }
  /// 2N: one seconds-per-sample and one seconds-per-all-reduce slot per worker.
  [[nodiscard]] std::size_t slots() const noexcept { return s_.measured.size(); }

  /// Adds a round to the open window, and closes the window where the schedule says.
  void add(const Schedule& schedule, const RoundSample& r) {
    if (r.round == 0) return;  // start-up
    s_.compute_s += r.compute_s;
    s_.samples += r.samples;
    s_.comm_s += r.comm_s;
    s_.collectives += r.collectives;
    if (r.collectives > 0) {
      const double m = r.comm_s / static_cast<double>(r.collectives);
      s_.round_collective_s += m;
      s_.round_collective_sq += m * m;
      ++s_.rounds;
    }
    if (!schedule.window_closes(r.round)) return;
    s_.ready_sample_s = s_.compute_s / s_.samples;
    s_.ready_collective_s = 0.0;
    if (s_.collectives > 0) {
      // The mean, plus the margin of standard deviations of the rounds' means (none from one round).
      const double mean = s_.comm_s / static_cast<double>(s_.collectives);
      double deviation = 0.0;
      if (s_.rounds > 1) {
        const double n = static_cast<double>(s_.rounds), round_mean = s_.round_collective_s / n;
        deviation = std::sqrt(std::max(0.0, (s_.round_collective_sq - n * round_mean * round_mean) / (n - 1)));
      }
      s_.ready_collective_s = mean + margin_of(schedule) * deviation;
    }
    s_.ready = true;
    s_.compute_s = s_.samples = s_.comm_s = 0.0;
    s_.collectives = 0;
    s_.round_collective_s = s_.round_collective_sq = 0.0;
    s_.rounds = 0;
  }

  /// Zeroes the slots and, when a closed window waits, fills this worker's entries; returns
  /// whether the slots carry a measurement (every worker returns the same).
  template <class T>
  [[nodiscard]] bool write(std::span<T> slots, int rank) noexcept {
    std::fill(slots.begin(), slots.end(), T(0));
    if (!s_.ready) return false;
    const auto r = static_cast<std::size_t>(rank), n = s_.measured.size() / 2;
    slots[r] = static_cast<T>(s_.ready_sample_s);
    slots[n + r] = static_cast<T>(s_.ready_collective_s);
    s_.ready = false;
    return true;
  }

  /// Reads everybody's measurements from reduced slots and computes this worker's next plan.
  template <class T>
  void read(std::span<const T> slots, const Schedule& schedule, const Options& options, int rank, int workers,
            std::size_t total_batch, const Plan& current) {
    const std::size_t n = s_.measured.size() / 2;
    for (std::size_t j = 0; j < 2 * n; ++j) s_.measured[j] = static_cast<double>(slots[j]);
    const std::span<const double> m(s_.measured);
    s_.plan = schedule.replan(options, rank, workers, total_batch, current,
                              Measured{m.first(n), m.subspan(n)});
    s_.pending = true;
  }

  /// Everybody's last measurements: N seconds of compute per sample, then N seconds per exchange.
  [[nodiscard]] std::span<const double> measured() const noexcept { return s_.measured; }
  /// Hands over a new plan once (at a round boundary); false when there is none.
  [[nodiscard]] bool take(Plan& plan) noexcept {
    if (!s_.pending) return false;
    s_.pending = false;
    plan = s_.plan;
    return true;
  }

  /// The schedule's margin (Adaptive::margin), 0 for a schedule without one.
  static double margin_of(const Schedule& schedule) noexcept {
    if constexpr (requires { schedule.margin; })
      return static_cast<double>(schedule.margin);
    else
      return 0.0;
  }
  /// Run state for a checkpoint: the open window's sums, a closed one not yet sent, the plan
  /// that waits for the next round boundary and everybody's last measurements.
  template <class Archive>
  void serialize(Archive& a) {
    const std::size_t slots = s_.measured.size();
    a("compute_s", s_.compute_s);
    a("samples", s_.samples);
    a("comm_s", s_.comm_s);
    a("collectives", s_.collectives);
    a("round_collective_s", s_.round_collective_s);
    a("round_collective_sq", s_.round_collective_sq);
    a("rounds", s_.rounds);
    a("ready_sample_s", s_.ready_sample_s);
    a("ready_collective_s", s_.ready_collective_s);
    a("ready", s_.ready);
    a("pending", s_.pending);
    a("plan_period", s_.plan.period);
    a("plan_batch_size", s_.plan.batch_size);
    a("plan_hiding_steps", s_.plan.hiding_steps);
    a("measured", s_.measured);
    if constexpr (!Archive::saving) {
      if (s_.pending && (s_.plan.period == 0 || s_.plan.batch_size == 0))
        a.fail("plan_period", "and plan_batch_size are not a plan (corrupt)");
      if (s_.measured.size() != slots)
        a.fail("measured", "holds " + std::to_string(s_.measured.size()) + " values where " + std::to_string(slots) + " belong");
    }
  }

 private:
  Sums s_{};
};

}  // namespace cocod::schedule
