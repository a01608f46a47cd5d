#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/mpi/collectives.hpp is internal: include <cocod/comm/mpi.hpp>"
#endif
// comm::Mpi's collectives on its duplicated communicator, each either blocking or in stages
// that MPI_Test or MPI_Wait advance (whoever drives them: see progress.hpp). With
// MpiOptions::deterministic an all-reduce is a reduce-scatter (an all-to-all whose slices are
// summed in rank order) then an all-gather: the sums of comm::Threads, to the bit.
#include <mpi.h>

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <vector>

#include "cocod/comm/detail/mpi/environment.hpp"
#include "cocod/comm/detail/rank_order.hpp"
#include "cocod/comm/detail/ticket_ring.hpp"

namespace cocod::comm::mpi_detail {

using comm::detail::Op;

/// One collective, advanced stage by stage so that it can be driven by MPI_Test polls.
struct Operation : comm::detail::Collective {
  Operation() = default;
  explicit Operation(const comm::detail::Collective& c) : comm::detail::Collective(c) {}
  int stage = 0;  // 0: not started
  MPI_Request request = MPI_REQUEST_NULL;
};

/// The duplicated communicator and the buffers of the rank-ordered sum. Used by one thread at a
/// time (the progress engine's lock or its communication thread).
class Collectives {
 public:
  Collectives(MPI_Comm comm, bool deterministic) : deterministic_(deterministic) {
    check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    counts_.resize(static_cast<std::size_t>(size_));
    displs_.resize(static_cast<std::size_t>(size_));
    recv_counts_.resize(static_cast<std::size_t>(size_));
    recv_displs_.resize(static_cast<std::size_t>(size_));
  }
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;
  ~Collectives() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] MPI_Comm handle() const noexcept { return comm_; }

  /// Advances `op` by as many stages as are ready; true when it completed. `block`: wait in
  /// MPI_Wait instead of testing.
  bool advance(Operation& op, bool block) { return op.is_double ? advance<double>(op, block) : advance<float>(op, block); }

  /// Runs `op` with MPI's blocking collectives, its best-tuned ones (the rank-ordered sum stays
  /// the same, so results are bitwise those of the staged path).
  void run_blocking(Operation& op) {
    if (op.is_double)
      execute_blocking<double>(op);
    else
      execute_blocking<float>(op);
  }

 private:
  template <class T>
  bool advance(Operation& op, bool block) {
    const MPI_Datatype type = datatype<T>();
    auto finished = [&]() {
      if (block) {
        check(MPI_Wait(&op.request, MPI_STATUS_IGNORE), "MPI_Wait");
        return true;
      }
      int flag = 0;
      check(MPI_Test(&op.request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
      return flag != 0;
    };
    T* data = static_cast<T*>(op.data);
    const int n = checked_count(op.count);
    for (;;) {
      switch (op.stage) {
        case 0:
          if (op.op == Op::broadcast) {
            check(MPI_Ibcast(data, n, type, op.root, comm_, &op.request), "MPI_Ibcast");
          } else if (!rank_ordered()) {
            check(MPI_Iallreduce(MPI_IN_PLACE, data, n, type, MPI_SUM, comm_, &op.request), "MPI_Iallreduce");
          } else {
            prepare_reduce_scatter<T>(op.count);
            check(MPI_Ialltoallv(data, counts_.data(), displs_.data(), type, scratch_.data(), recv_counts_.data(),
                                 recv_displs_.data(), type, comm_, &op.request),
                  "MPI_Ialltoallv");
          }
          op.stage = 1;
          break;
        case 1:
          if (!finished()) return false;
          if (op.op == Op::broadcast || !rank_ordered()) {
            op.stage = 0;
            return true;
          }
          // Sum the received slices in rank order, into this rank's slice, then share it.
          sum_own_slice<T>(data);
          check(MPI_Iallgatherv(MPI_IN_PLACE, 0, type, data, counts_.data(), displs_.data(), type, comm_, &op.request),
                "MPI_Iallgatherv");
          op.stage = 2;
          break;
        default:
          if (!finished()) return false;
          op.stage = 0;
          return true;
      }
    }
  }

  template <class T>
  void execute_blocking(Operation& op) {
    const MPI_Datatype type = datatype<T>();
    T* data = static_cast<T*>(op.data);
    const int n = checked_count(op.count);
    if (op.op == Op::broadcast) {
      check(MPI_Bcast(data, n, type, op.root, comm_), "MPI_Bcast");
    } else if (!rank_ordered()) {
      check(MPI_Allreduce(MPI_IN_PLACE, data, n, type, MPI_SUM, comm_), "MPI_Allreduce");
    } else {
      prepare_reduce_scatter<T>(op.count);
      check(MPI_Alltoallv(data, counts_.data(), displs_.data(), type, scratch_.data(), recv_counts_.data(),
                          recv_displs_.data(), type, comm_),
            "MPI_Alltoallv");
      sum_own_slice<T>(data);
      check(MPI_Allgatherv(MPI_IN_PLACE, 0, type, data, counts_.data(), displs_.data(), type, comm_),
            "MPI_Allgatherv");
    }
  }

  // One rank has nothing to exchange, so its sum is MPI's whatever the setting.
  [[nodiscard]] bool rank_ordered() const noexcept { return deterministic_ && size_ > 1; }

  static int checked_count(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::invalid_argument("cocod::comm::Mpi: buffers of more than 2^31-1 elements are not supported");
    return static_cast<int>(n);
  }

  // Slices (those of comm::Threads), receive counts and the scratch space of the
  // reduce-scatter (an all-to-all).
  template <class T>
  void prepare_reduce_scatter(std::size_t n) {
    const auto N = static_cast<std::size_t>(size_);
    for (std::size_t q = 0; q < N; ++q) {
      const auto [lo, hi] = comm::detail::slice(q, n, N);
      counts_[q] = static_cast<int>(hi - lo);
      displs_[q] = static_cast<int>(lo);
    }
    const int mine = counts_[static_cast<std::size_t>(rank_)];
    for (std::size_t q = 0; q < N; ++q) {
      recv_counts_[q] = mine;
      recv_displs_[q] = static_cast<int>(q) * mine;
    }
    const std::size_t bytes = static_cast<std::size_t>(mine) * N * sizeof(T);
    if (scratch_.size() < bytes) scratch_.resize(bytes);
  }

  template <class T>
  void sum_own_slice(T* data) {
    const auto r = static_cast<std::size_t>(rank_);
    const auto mine = static_cast<std::size_t>(counts_[r]);
    const T* parts = reinterpret_cast<const T*>(scratch_.data());
    comm::detail::sum_in_rank_order(data + displs_[r], mine, counts_.size(),
                                    [&](std::size_t q) { return parts + q * mine; });
  }

  bool deterministic_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<int> counts_, displs_, recv_counts_, recv_displs_;
  std::vector<std::byte> scratch_;
};

}  // namespace cocod::comm::mpi_detail
