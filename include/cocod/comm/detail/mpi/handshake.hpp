#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/mpi/handshake.hpp is internal: include <cocod/comm/mpi.hpp>"
#endif
// Before its data moves, every collective of comm::Mpi sends a description of itself (a Header:
// what, of which scalar, how many, from which root) to every peer and receives theirs. Ranks
// whose collectives differ would otherwise pair wrong calls and hang, or corrupt buffers; with
// every description at hand, every rank raises the same DistributedError naming the ranks and
// what they called, as comm::Threads does, before any data moves. A rank whose communicator goes
// away sends a last description that says so, which its peers' next collective sees. Point to
// point messages rather than one MPI collective: a rank then knows whose description has not
// arrived, and a stalled collective (MpiOptions::stall_timeout) can name the ranks it waits for.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cocod/comm/detail/mpi/environment.hpp"
#include "cocod/comm/detail/ticket_ring.hpp"

namespace cocod::comm::mpi_detail {

using comm::detail::Op;

/// What a rank is about to call, as its peers receive it. code 0: the rank calls no more
/// collectives (its communicator is going away); else 1 + (op, scalar, blocking) in bits. count:
/// elements, or the block size in bytes of a byte collective.
struct Header {
  std::int64_t code = 0, count = 0, root = 0;
};
static_assert(sizeof(Header) == 3 * sizeof(std::int64_t));

[[nodiscard]] inline Header header_of(const comm::detail::Collective& c, bool blocking) noexcept {
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
  const comm::detail::Collective c{static_cast<Op>((h.code - 1) >> 2), (((h.code - 1) >> 1) & 1) != 0, nullptr,
                                   static_cast<std::size_t>(h.count), static_cast<int>(h.root)};
  const bool blocking = ((h.code - 1) & 1) != 0;
  return comm::detail::describe(c) + (!kind ? "" : blocking ? " by MPI's blocking calls" : " by MPI's non-blocking calls");
}

/// "rank 3" or "ranks 0, 1, 2": at most 8 named, then how many more.
[[nodiscard]] inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < 8; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) s += " and " + std::to_string(ranks.size() - 8) + " more";
  return s;
}

/// The exchange of descriptions of one collective with every peer.
class Handshake {
 public:
  Handshake(MPI_Comm comm, int rank, int size)
      : comm_(comm), rank_(rank), size_(size), headers_(static_cast<std::size_t>(size)),
        requests_(2 * static_cast<std::size_t>(size - 1), MPI_REQUEST_NULL) {}

  /// Sends this rank's header to every peer and receives theirs.
  void start(const Header& mine) {
    constexpr int tag = 0x0c0d;
    headers_[static_cast<std::size_t>(rank_)] = mine;
    std::size_t i = 0;
    for (int q = 0; q < size_; ++q)
      if (q != rank_)
        check(MPI_Irecv(&headers_[static_cast<std::size_t>(q)], 3, MPI_INT64_T, q, tag, comm_, &requests_[i++]), "MPI_Irecv");
    for (int q = 0; q < size_; ++q)
      if (q != rank_)
        check(MPI_Isend(&headers_[static_cast<std::size_t>(rank_)], 3, MPI_INT64_T, q, tag, comm_, &requests_[i++]), "MPI_Isend");
  }
  /// Its requests: the receives (peers in rank order), then the sends.
  [[nodiscard]] MPI_Request* requests() noexcept { return requests_.data(); }
  [[nodiscard]] int count() const noexcept { return static_cast<int>(requests_.size()); }

  /// Empty when every rank described the same collective; else the mismatch, the same text on
  /// every rank (every rank holds every header).
  [[nodiscard]] std::string mismatch() const {
    bool same = true;
    for (const Header& h : headers_) same = same && h == headers_[0];
    if (same) return {};
    struct Group {
      Header header;
      std::vector<int> ranks;
    };
    std::vector<Group> groups;
    for (int q = 0; q < size_; ++q) {
      const Header& h = headers_[static_cast<std::size_t>(q)];
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
  /// The peers whose description has not arrived (tested now).
  [[nodiscard]] std::vector<int> missing() {
    std::vector<int> out;
    std::size_t i = 0;
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      int flag = 0;
      MPI_Test(&requests_[i++], &flag, MPI_STATUS_IGNORE);
      if (!flag) out.push_back(q);
    }
    return out;
  }

 private:
  MPI_Comm comm_;
  int rank_, size_;
  std::vector<Header> headers_;       // every rank's, for the exchange in flight
  std::vector<MPI_Request> requests_;
};

}  // namespace cocod::comm::mpi_detail
