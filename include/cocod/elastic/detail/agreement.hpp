#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/elastic/detail/agreement.hpp is internal: include <cocod/elastic/train.hpp>"
#endif
// What the members of an elastic epoch agree on before they train: the settings that decide
// which collectives each calls, which rounds it holds and when the run ends, compared by name.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/checkpoint.hpp"
#include "cocod/comm/gloo.hpp"
#include "cocod/elastic/detail/train_options.hpp"
#include "cocod/elastic/snapshots.hpp"
#include "cocod/options.hpp"
#include "cocod/stop.hpp"

namespace cocod::elastic::detail {

// A setting every member of an epoch must share (most of them a resume lets change): its name,
// its value as the agreement exchanges it, and how a message shows one.
struct Agreed {
  std::string name;
  double value;
  std::function<std::string(double)> show;
};
// The run's length as the members compare it: its kind (Epochs, Steps, Rounds or a stop of the
// caller's own), and the steps it gives at 2^20 steps per epoch (exact: a count times a power of
// two; equal counts of one kind give equal values).
template <class Stop>
std::vector<Agreed> length_settings(const Stop& stop, std::size_t period) {
  constexpr double kind = std::is_same_v<Stop, Epochs> ? 0 : std::is_same_v<Stop, Steps> ? 1 : std::is_same_v<Stop, Rounds> ? 2 : 3;
  const double steps = static_cast<double>(stop.steps(static_cast<double>(1 << 20), period));
  return {Agreed{"the kind of the run's stop", kind,
                 [](double x) -> std::string { return x == 0 ? "Epochs" : x == 1 ? "Steps" : x == 2 ? "Rounds" : "a stop of its own"; }},
          Agreed{"the run's length (its stop)", steps, [](double v) {
                   const std::string at = checkpoint::detail::text(v) + " steps at 2^20 steps per epoch";
                   if constexpr (std::is_same_v<Stop, Epochs>) return "Epochs{" + checkpoint::detail::text(v / (1 << 20)) + "}: " + at;
                   else return at;
                 }}};
}
// What decides which collectives a member calls, which rounds it holds and when the run ends
// (max_skips only with NonFinite::skip, the only one that reads it).
template <class Stop>
std::vector<Agreed> agreed_settings(const TrainOptions& o, const Options& options, const Stop& stop) {
  const auto count = [](const char* name, std::size_t v) {
    return Agreed{name, static_cast<double>(v), [](double x) { return std::to_string(static_cast<std::size_t>(x)); }};
  };
  std::vector<Agreed> all{
      Agreed{"TrainOptions::checkpoints", o.checkpoints ? 1.0 : 0.0, [](double x) { return x != 0 ? "a directory" : "none"; }},
      count("TrainOptions::checkpoint_every", o.checkpoints ? o.checkpoint_every : 0),
      Agreed{"TrainOptions::resume", o.resume ? 1.0 : 0.0, [](double x) { return x != 0 ? "true" : "false"; }},
      count("TrainOptions::snapshot_every", o.snapshot_every),
      count("Options::period", options.period),
      Agreed{"Options::non_finite", static_cast<double>(options.non_finite),
             [](double x) { return x == 0 ? "raise" : x == 1 ? "skip" : "off"; }},
      count("Options::max_skips", options.non_finite == NonFinite::skip ? options.max_skips : 0)};
  for (Agreed& a : length_settings(stop, options.period)) all.push_back(std::move(a));
  return all;
}
// Every member of an epoch passes the same agreed_settings(): each puts its own in its slots; a
// worker whose settings differ from the reference ends with std::invalid_argument naming the
// setting, and the others go on to the next epoch without it (Refused), as with a refused
// newcomer. The reference is the donor when the epoch continues from a round (it agreed in an
// earlier epoch), else the settings most members pass (ties: the lowest rank's). It is the first
// collective of an epoch: a newcomer that differs is refused before any collective of training.
inline void agree_settings(comm::Gloo& comm, const std::vector<Agreed>& mine, std::optional<int> donor, std::int64_t epoch) {
  const auto n = static_cast<std::size_t>(comm.size()), rank = static_cast<std::size_t>(comm.rank()), k = mine.size();
  std::vector<double> slots(n * k, 0.0);
  for (std::size_t f = 0; f < k; ++f) slots[rank * k + f] = mine[f].value;
  comm.all_reduce(std::span<double>(slots));
  const auto same = [&](std::size_t i, std::size_t j) { return std::equal(&slots[i * k], &slots[i * k] + k, &slots[j * k]); };
  std::size_t ref = donor ? static_cast<std::size_t>(*donor) : 0, most = 0;
  for (std::size_t i = 0; !donor && i < n; ++i) {
    std::size_t count = 0;
    for (std::size_t j = 0; j < n; ++j) count += same(i, j) ? 1 : 0;
    if (count > most) std::tie(ref, most) = std::pair{i, count};
  }
  const auto differs = [&](std::size_t j) -> std::optional<std::size_t> {
    for (std::size_t f = 0; f < k; ++f)
      if (slots[j * k + f] != slots[ref * k + f]) return f;
    return std::nullopt;
  };
  std::string names;
  for (std::size_t f = 0; f < k; ++f) names += (f == 0 ? "" : f + 1 == k ? " and " : ", ") + mine[f].name;
  if (const auto f = differs(rank))
    throw std::invalid_argument("cocod::elastic: " + mine[*f].name + " differs from the run's (rank " + std::to_string(ref) +
                                " of epoch " + std::to_string(epoch) + ": " + mine[*f].show(slots[ref * k + *f]) +
                                ", this worker: " + mine[*f].show(mine[*f].value) + "): every worker passes the same " + names);
  for (std::size_t j = 0; j < n; ++j)
    if (const auto f = differs(j))
      throw Refused("cocod::elastic: rank " + std::to_string(j) + " of epoch " + std::to_string(epoch) + " was refused: its " +
                    mine[*f].name + " differs from the run's");
}

}  // namespace cocod::elastic::detail
