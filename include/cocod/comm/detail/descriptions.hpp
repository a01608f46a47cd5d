#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/descriptions.hpp is internal: include a communicator's header"
#endif
// The description of a collective that the communicators between processes (comm::Mpi,
// comm::Gloo) send to every peer before its data moves, and the one message every rank derives
// from all of them when they differ: ranks that call different collectives, or whose
// communicator went away, raise the same DistributedError, as comm::Threads does.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cocod/comm/detail/ticket_ring.hpp"

namespace cocod::comm::detail {

/// What a rank is about to call, as its peers receive it. code 0: the rank calls no more
/// collectives (its communicator is going away); else 1 + (op, scalar, blocking) in bits. count:
/// elements, or the block size in bytes of a byte collective.
struct Header {
  std::int64_t code = 0, count = 0, root = 0;
};
static_assert(sizeof(Header) == 3 * sizeof(std::int64_t));

[[nodiscard]] inline Header header_of(const Collective& c, bool blocking) noexcept {
  return {1 + ((static_cast<std::int64_t>(c.op) << 2) | (std::int64_t{c.is_double} << 1) | std::int64_t{blocking}),
          static_cast<std::int64_t>(c.count), c.root};
}
[[nodiscard]] inline bool operator==(const Header& a, const Header& b) noexcept {
  return a.code == b.code && a.count == b.count && a.root == b.root;
}
/// As comm::Threads describes a collective; `kind`: say whether MPI's blocking or non-blocking
/// calls move its data (the one difference when the ranks' settings or calls differ in that
/// alone: MPI never matches the two kinds).
[[nodiscard]] inline std::string describe(const Header& h, bool kind) {
  if (h.code == 0) return "no more collectives (its communicator went away)";
  const Collective c{static_cast<Op>((h.code - 1) >> 2), (((h.code - 1) >> 1) & 1) != 0, nullptr,
                     static_cast<std::size_t>(h.count), static_cast<int>(h.root)};
  const bool blocking = ((h.code - 1) & 1) != 0;
  return describe(c) + (!kind ? "" : blocking ? " by MPI's blocking calls" : " by MPI's non-blocking calls");
}

/// "rank 3" or "ranks 0, 1, 2": at most 8 named, then how many more.
[[nodiscard]] inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < 8; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) s += " and " + std::to_string(ranks.size() - 8) + " more";
  return s;
}

/// Empty when every rank described the same collective; else the mismatch, the same text on
/// every rank (every rank holds every header). `headers`: every rank's, in rank order.
[[nodiscard]] inline std::string mismatch(const std::vector<Header>& headers) {
  bool same = true;
  for (const Header& h : headers) same = same && h == headers[0];
  if (same) return {};
  struct Group {
    Header header;
    std::vector<int> ranks;
  };
  std::vector<Group> groups;
  for (int q = 0; q < static_cast<int>(headers.size()); ++q) {
    const Header& h = headers[static_cast<std::size_t>(q)];
    auto g = groups.begin();
    while (g != groups.end() && !(g->header == h)) ++g;
    if (g == groups.end()) groups.push_back({h, {q}});
    else g->ranks.push_back(q);
  }
  // Differing in the kind of MPI call alone (a setting or a call that differs between ranks)?
  bool kind_only = true;
  for (const Group& g : groups) {
    const Header& a = g.header;
    const Header& b = groups.front().header;
    kind_only = kind_only && a.code != 0 && b.code != 0 && ((a.code - 1) >> 1) == ((b.code - 1) >> 1) &&
                a.count == b.count && a.root == b.root;
  }
  std::vector<int> gone;
  std::string calls;
  for (const Group& g : groups) {
    if (g.header.code == 0) {
      gone = g.ranks;
      continue;
    }
    calls += (calls.empty() ? "" : " and ") + rank_list(g.ranks) + (g.ranks.size() == 1 ? " calls " : " call ") +
             describe(g.header, kind_only);
  }
  if (!gone.empty())
    return rank_list(gone) + " returned while " + calls + " (the workers called different sequences of collectives)";
  std::string s = "workers called mismatched collectives (";
  for (std::size_t i = 0; i < groups.size(); ++i)
    s += (i ? "; " : "") + rank_list(groups[i].ranks) + ": " + describe(groups[i].header, kind_only);
  return s + ")";
}

}  // namespace cocod::comm::detail
