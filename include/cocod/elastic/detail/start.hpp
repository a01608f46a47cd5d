#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/elastic/detail/start.hpp is internal: include <cocod/elastic/coordinator.hpp>"
#endif
// Where a new epoch continues from, read from its continuing members' reports of the rounds they
// hold: the latest round that every one holds, their positions of it agreeing; the lowest-ranked
// of them gives its state to the newcomers.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cocod/elastic/protocol.hpp"

namespace cocod::elastic::detail {

struct StartChoice {
  std::optional<protocol::Start> start{};  // where the epoch continues from (nullopt: not yet known)
  std::optional<std::int64_t> malformed{};  // a member whose report cannot be read (to be expelled)
  bool none_in_common = false;            // (start is fresh: they hold no round in common)
};

/// `continuing` in rank order; `reports[i]` member i's report ("" when it has not reported yet).
inline StartChoice choose_start(const std::vector<std::int64_t>& continuing, const std::vector<std::string>& reports) {
  if (continuing.empty()) return {.start = protocol::Start{}};
  std::map<std::int64_t, std::set<std::string>> positions;  // round -> positions
  std::map<std::int64_t, std::size_t> holders;
  for (std::size_t i = 0; i < continuing.size(); ++i) {
    if (reports[i].empty()) return {};  // not yet reported
    const auto held = protocol::parse_held(reports[i]);
    if (!held) return {.malformed = continuing[i]};
    std::set<std::int64_t> rounds;
    for (const protocol::Held& h : *held)
      if (rounds.insert(h.round).second) ++holders[h.round], positions[h.round].insert(h.position);
  }
  for (auto it = holders.rbegin(); it != holders.rend(); ++it) {
    if (it->second != continuing.size()) continue;
    if (const std::size_t n = positions[it->first].size(); n != 1)
      return {.start = protocol::Start{.round = std::nullopt, .donor = 0,
                                       .error = "the members' states of round " + std::to_string(it->first) + " differ (" +
                                                std::to_string(n) + " different positions reported)"}};
    return {.start = protocol::Start{.round = it->first, .donor = continuing.front()}};
  }
  return {.start = protocol::Start{}, .none_in_common = true};
}

}  // namespace cocod::elastic::detail
