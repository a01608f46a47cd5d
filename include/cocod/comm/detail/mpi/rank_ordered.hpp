#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/mpi/rank_ordered.hpp is internal: include <cocod/comm/mpi.hpp>"
#endif
// comm::Mpi's rank-ordered all-reduce as one pipelined schedule of point-to-point messages.
// Rank q owns slice q of the buffer (comm::Threads' slices) and sums it in rank order. The
// slice is cut into chunks. Every rank first posts all its receives and sends of the
// reduce-scatter. Then, chunk by chunk, as soon as a chunk has arrived from every peer, it is
// summed and sent to every peer, while the next chunks are still arriving. Each rank's own
// slice is read in place, never copied, and the summed chunks of the others arrive straight
// in the buffer. The sums are those of comm::Threads, to the bit: the same slices, and every
// element added in rank order.
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "cocod/comm/detail/mpi/environment.hpp"
#include "cocod/comm/detail/rank_order.hpp"

namespace cocod::comm::mpi_detail {

class RankOrderedAllReduce {
 public:
  /// Elements per chunk: 64 Ki (256 KiB of floats); a slice of fewer is one chunk.
  static constexpr std::size_t chunk_elements = std::size_t{1} << 16;
  static constexpr int tag_base = 0x1000;  // above the descriptions' tag; reduce 2c, gather 2c + 1
  static constexpr std::size_t max_chunks = 8192;

  /// Posts the reduce-scatter of `data` (n elements of T); advance() then runs the schedule.
  template <class T>
  void start(T* data, std::size_t n, MPI_Datatype type, MPI_Comm comm, int rank, int size) {
    data_ = data;
    elem_ = sizeof(T);
    type_ = type;
    comm_ = comm;
    rank_ = rank;
    size_ = size;
    n_ = n;
    const auto N = static_cast<std::size_t>(size);
    std::size_t longest = 0;
    for (std::size_t q = 0; q < N; ++q) {
      const auto [lo, hi] = comm::detail::slice(q, n, N);
      longest = std::max(longest, hi - lo);
    }
    chunks_ = std::clamp<std::size_t>((longest + chunk_elements - 1) / chunk_elements, 1, max_chunks);
    const std::size_t peers = N - 1, total = peers * chunks_;
    for (auto* v : {&reduce_recv_, &reduce_send_, &gather_send_, &gather_recv_}) v->assign(total, MPI_REQUEST_NULL);
    const auto [lo, hi] = own();
    const std::size_t mine = hi - lo;
    if (scratch_.size() < peers * mine * elem_) scratch_.resize(peers * mine * elem_);
    // Every receive first, then the sends chunk by chunk (chunk 0 reaches everyone first).
    for (std::size_t p = 0; p < peers; ++p)
      for (std::size_t c = 0; c < chunks_; ++c) {
        const auto [a, b] = chunk(mine, c);
        check(MPI_Irecv(scratch_.data() + (p * mine + a) * elem_, count(b - a), type, peer(p), tag_base + 2 * static_cast<int>(c),
                        comm, &reduce_recv_[p * chunks_ + c]),
              "MPI_Irecv");
      }
    for (std::size_t c = 0; c < chunks_; ++c)
      for (std::size_t p = 0; p < peers; ++p) {
        const auto [qlo, qhi] = comm::detail::slice(static_cast<std::size_t>(peer(p)), n, N);
        const auto [a, b] = chunk(qhi - qlo, c);
        check(MPI_Isend(bytes(qlo + a), count(b - a), type, peer(p), tag_base + 2 * static_cast<int>(c), comm,
                        &reduce_send_[p * chunks_ + c]),
              "MPI_Isend");
      }
    summed_ = 0;
    gathered_.assign(peers, 0);
  }

  /// Runs the schedule as far as it goes: with `block` to the end, else without waiting. True
  /// when the all-reduce completed. `wait(requests, n, block)` tests or waits (and may throw on
  /// a stall).
  template <class T, class Wait>
  bool advance(bool block, Wait&& wait) {
    const std::size_t peers = static_cast<std::size_t>(size_) - 1;
    for (;;) {
      bool moved = false;
      // This rank's next chunk, once every peer's part has arrived: sum it, send it to all.
      if (summed_ < chunks_ && wait_column(reduce_recv_, summed_, block, wait)) {
        sum_chunk<T>(summed_);
        const auto [lo, hi] = own();
        const auto [a, b] = chunk(hi - lo, summed_);
        for (std::size_t p = 0; p < peers; ++p)
          check(MPI_Isend(bytes(lo + a), count(b - a), type_, peer(p), tag_base + 2 * static_cast<int>(summed_) + 1, comm_,
                          &gather_send_[p * chunks_ + summed_]),
                "MPI_Isend");
        ++summed_;
        moved = true;
      }
      // A peer's summed chunk lands where this rank's part of it was sent from: its receive is
      // posted once that send completed.
      for (std::size_t p = 0; p < peers; ++p) {
        while (gathered_[p] < chunks_) {
          const std::size_t c = gathered_[p];
          MPI_Request& sent = reduce_send_[p * chunks_ + c];
          // (blocking: only after this rank's own chunks are summed and sent, so that no
          // peer waits on them while this rank waits here)
          if (!wait(&sent, 1, block && summed_ == chunks_)) break;
          const auto [qlo, qhi] = comm::detail::slice(static_cast<std::size_t>(peer(p)), n_, static_cast<std::size_t>(size_));
          const auto [a, b] = chunk(qhi - qlo, c);
          check(MPI_Irecv(bytes(qlo + a), count(b - a), type_, peer(p), tag_base + 2 * static_cast<int>(c) + 1, comm_,
                          &gather_recv_[p * chunks_ + c]),
                "MPI_Irecv");
          ++gathered_[p];
          moved = true;
        }
      }
      const bool posted = summed_ == chunks_ &&
                          std::all_of(gathered_.begin(), gathered_.end(), [&](std::size_t g) { return g == chunks_; });
      if (posted) {
        if (!wait(gather_recv_.data(), static_cast<int>(gather_recv_.size()), block)) return false;
        if (!wait(gather_send_.data(), static_cast<int>(gather_send_.size()), block)) return false;
        return true;
      }
      if (!moved && !block) return false;
    }
  }

 private:
  [[nodiscard]] int peer(std::size_t p) const noexcept {  // the p-th other rank, in rank order
    return static_cast<int>(p) < rank_ ? static_cast<int>(p) : static_cast<int>(p) + 1;
  }
  [[nodiscard]] std::pair<std::size_t, std::size_t> own() const noexcept {
    return comm::detail::slice(static_cast<std::size_t>(rank_), n_, static_cast<std::size_t>(size_));
  }
  [[nodiscard]] std::pair<std::size_t, std::size_t> chunk(std::size_t len, std::size_t c) const noexcept {
    return {c * len / chunks_, (c + 1) * len / chunks_};
  }
  [[nodiscard]] std::byte* bytes(std::size_t element) const noexcept {
    return static_cast<std::byte*>(data_) + element * elem_;
  }
  static int count(std::size_t n) noexcept { return static_cast<int>(n); }

  // Whether chunk c has arrived from every peer (tested, or waited for with `block`).
  template <class Wait>
  bool wait_column(std::vector<MPI_Request>& requests, std::size_t c, bool block, Wait& wait) {
    const std::size_t peers = static_cast<std::size_t>(size_) - 1;
    for (std::size_t p = 0; p < peers; ++p)
      if (!wait(&requests[p * chunks_ + c], 1, block)) return false;
    return true;
  }

  // Chunk c of this rank's slice: the ranks' parts added in rank order, this rank's read in
  // place from the buffer (through a block-sized copy, since the sum overwrites it).
  template <class T>
  void sum_chunk(std::size_t c) {
    const auto [lo, hi] = own();
    const std::size_t mine = hi - lo;
    const auto [a, b] = chunk(mine, c);
    T* out = static_cast<T*>(data_) + lo + a;
    const T* parts = reinterpret_cast<const T*>(scratch_.data());
    constexpr std::size_t block = 4096;
    own_block_.resize(block * sizeof(T));
    T* kept = reinterpret_cast<T*>(own_block_.data());
    for (std::size_t s = 0; s < b - a; s += block) {
      const std::size_t len = std::min(block, b - a - s);
      std::copy(out + s, out + s + len, kept);
      comm::detail::sum_in_rank_order(out + s, len, static_cast<std::size_t>(size_), [&](std::size_t q) -> const T* {
        if (q == static_cast<std::size_t>(rank_)) return kept;
        const std::size_t p = q < static_cast<std::size_t>(rank_) ? q : q - 1;
        return parts + p * mine + a + s;
      });
    }
  }

  void* data_ = nullptr;
  std::size_t elem_ = 0, n_ = 0, chunks_ = 1, summed_ = 0;
  MPI_Datatype type_{};
  MPI_Comm comm_{};
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> reduce_recv_, reduce_send_, gather_send_, gather_recv_;  // [peer * chunks + chunk]
  std::vector<std::size_t> gathered_;  // per peer: chunks whose gathered receive is posted
  std::vector<std::byte> scratch_, own_block_;
};

}  // namespace cocod::comm::mpi_detail
