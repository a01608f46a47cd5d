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

#include "cocod/comm/detail/descriptions.hpp"
#include "cocod/comm/detail/mpi/environment.hpp"
#include "cocod/comm/detail/ticket_ring.hpp"

namespace cocod::comm::mpi_detail {

using comm::detail::Header;
using comm::detail::header_of;
using comm::detail::Op;
using comm::detail::rank_list;

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
  [[nodiscard]] std::string mismatch() const { return comm::detail::mismatch(headers_); }
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
