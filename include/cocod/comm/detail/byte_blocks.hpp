#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/byte_blocks.hpp is internal: include a communicator's header"
#endif
// The rules every communicator checks before it runs a byte collective (all_to_all,
// all_gather): the buffers' sizes, and that they do not overlap (except the one in-place form of
// all_gather). Violations throw std::invalid_argument naming the communicator, the call and both
// sizes, on the calling worker, before anything is posted.
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace cocod::comm::detail {

[[nodiscard]] inline std::string bytes_text(std::size_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

/// Whether two byte ranges share a byte (empty ranges share none).
[[nodiscard]] inline bool overlap(const void* a, std::size_t na, const void* b, std::size_t nb) noexcept {
  if (na == 0 || nb == 0) return false;
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return pa < pb + nb && pb < pa + na;
}

/// The block size of an all-to-all among `workers`: send and recv of the same size, a multiple of
/// `workers`, not overlapping. `where` names the call ("cocod::comm::Threads::all_to_all").
inline std::size_t all_to_all_block(const char* where, const void* send, std::size_t send_bytes, const void* recv,
                                    std::size_t recv_bytes, int workers) {
  const auto n = static_cast<std::size_t>(workers);
  if (send_bytes != recv_bytes || send_bytes % n != 0)
    throw std::invalid_argument(std::string(where) + ": send and recv must have the same size, " +
                                std::to_string(workers) + (workers == 1 ? " block" : " blocks of equal size") +
                                " (got send " + bytes_text(send_bytes) +
                                ", recv " + bytes_text(recv_bytes) + ", " + std::to_string(workers) +
                                (workers == 1 ? " worker)" : " workers)"));
  if (overlap(send, send_bytes, recv, recv_bytes))
    throw std::invalid_argument(std::string(where) + ": send and recv overlap (send " + bytes_text(send_bytes) +
                                ", recv " + bytes_text(recv_bytes) + ")");
  return send_bytes / n;
}

/// The block size of an all-gather among `workers`: recv holds `workers` blocks of send's size.
/// send may be recv's own block (block `rank`: in place); otherwise the two must not overlap.
inline std::size_t all_gather_block(const char* where, const void* send, std::size_t send_bytes, const void* recv,
                                    std::size_t recv_bytes, int workers, int rank) {
  const auto n = static_cast<std::size_t>(workers);
  if (recv_bytes != n * send_bytes)
    throw std::invalid_argument(std::string(where) + ": recv must hold " + std::to_string(workers) +
                                (workers == 1 ? " block" : " blocks") + " of send's size (got send " +
                                bytes_text(send_bytes) + ", recv " + bytes_text(recv_bytes) + ", " +
                                std::to_string(workers) + (workers == 1 ? " worker)" : " workers)"));
  const bool in_place = send_bytes > 0 && send == static_cast<const std::byte*>(recv) +
                                                       static_cast<std::size_t>(rank) * send_bytes;
  if (!in_place && overlap(send, send_bytes, recv, recv_bytes))
    throw std::invalid_argument(std::string(where) + ": send and recv overlap, and send is not recv's block " +
                                std::to_string(rank) + " (send " + bytes_text(send_bytes) + ", recv " +
                                bytes_text(recv_bytes) + ")");
  return send_bytes;
}

/// The block size of a byte collective (`all_to_all`, else an all-gather) of rank `rank` among
/// `workers`, checked by the rules above: the one check every communicator makes.
template <class Send, class Recv>
std::size_t byte_block(bool all_to_all, const char* where, const Send& send, const Recv& recv, int workers, int rank) {
  return all_to_all ? all_to_all_block(where, send.data(), send.size(), recv.data(), recv.size(), workers)
                    : all_gather_block(where, send.data(), send.size(), recv.data(), recv.size(), workers, rank);
}

}  // namespace cocod::comm::detail
