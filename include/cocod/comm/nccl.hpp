#pragma once
// GPU workers over NCCL: one communicator per device, its own CUDA stream, all-reduces that
// overlap the kernels of the compute stream. Needs nvcc and the cocod::cuda target (which links
// NCCL when the toolkit ships it).
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cocod/backend/device_span.hpp"
#include "cocod/backend/scalar.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/errors.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/comm/detail/byte_blocks.hpp"
#include "cocod/comm/detail/nccl/request.hpp"
#include "cocod/comm/detail/nccl/state.hpp"
#include "cocod/comm/detail/worker_threads.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::comm {

/// The communicator of one GPU worker. Collectives on device_span buffers run on the worker's
/// communication stream after the work already queued on the default (compute) stream, so a
/// posted all-reduce overlaps the kernels queued after it. Host-memory collectives (the small
/// set-up agreement of a run) go through a device scratch buffer, blocking. The byte
/// collectives (all_to_all, all_gather) take device buffers only, so Nccl does not satisfy
/// ByteCollectives, whose buffers are host memory.
///
///     cocod::comm::Nccl::run({0, 1, 2, 3}, [&](cocod::comm::Nccl comm) { ... });   // one process
///     cocod::comm::Nccl comm{id, rank, size, device};   // one process per GPU (id from MPI)
class Nccl {
 public:
  /// A posted collective: wait() blocks until it completed on the device; dropping it waits too.
  using Request = nccl_detail::Request;

  /// Joins an NCCL clique of `size` ranks identified by `id` (from ncclGetUniqueId on one rank,
  /// distributed by the application, e.g. with MPI_Bcast), on CUDA device `device`.
  Nccl(ncclUniqueId id, int rank, int size, int device) {
    nccl_detail::check(cudaSetDevice(device), "cudaSetDevice");
    ncclComm_t comm = nullptr;
    nccl_detail::check(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank");
    state_ = std::make_shared<nccl_detail::Handles>(comm, device);
  }

  /// Runs fn(Nccl) on one thread per device (NCCL wants one thread per communicator), rank r on
  /// devices[r]. If a worker throws, the communicators are aborted so the others do not hang
  /// (their collectives fail with cocod::Aborted), and run rethrows the exception of the worker
  /// that failed, not the Aborted of those it stopped.
  template <class F>
  static void run(const std::vector<int>& devices, F&& fn) {
    const int n = static_cast<int>(devices.size());
    if (n < 1) throw std::invalid_argument("cocod::comm::Nccl::run: needs at least one device");
    std::vector<ncclComm_t> comms(devices.size());
    nccl_detail::check(ncclCommInitAll(comms.data(), n, devices.data()), "ncclCommInitAll");
    std::atomic<bool> aborted{false};
    // run owns the communicators: a worker's Handles never destroys one (a failing worker's would
    // be destroyed while it unwinds, then aborted: a use after free), and each is either
    // aborted once (when a worker failed; ncclCommAbort frees it) or destroyed once at the end.
    struct Release {
      std::vector<ncclComm_t>& comms;
      std::atomic<bool>& aborted;
      ~Release() {
        if (!aborted)
          for (auto c : comms) ncclCommDestroy(c);
      }
    } release{comms, aborted};
    detail::run_workers(
        n,
        [&](int r) {
          const auto i = static_cast<std::size_t>(r);
          try {
            Nccl comm(std::make_shared<nccl_detail::Handles>(comms[i], devices[i], false));
            fn(comm);
          } catch (const Aborted&) {
            throw;
          } catch (const std::exception& e) {
            // Once the communicators are aborted, every NCCL call fails: a consequence of the
            // worker that failed first, whose exception is the one to report.
            if (!aborted) throw;
            throw Aborted(std::string("cocod::comm::Nccl: collective aborted: ") + e.what());
          }
        },
        [&](const std::string&) {
          if (!aborted.exchange(true))
            for (auto c : comms) ncclCommAbort(c);  // wakes the others; their calls fail
        },
        [](int) {});
  }

  [[nodiscard]] int rank() const noexcept { return state_->rank; }
  [[nodiscard]] int size() const noexcept { return state_->size; }
  [[nodiscard]] int device() const noexcept { return state_->device; }
  [[nodiscard]] cudaStream_t stream() const noexcept { return state_->stream; }

  template <Scalar T>
  void broadcast(device_span<T> buffer, int root) {
    after_compute();
    nccl_detail::check(ncclBroadcast(buffer.data(), buffer.data(), buffer.size(), nccl_detail::type<T>(), root,
                                     state_->comm, state_->stream),
                       "ncclBroadcast");
    nccl_detail::check(cudaStreamSynchronize(state_->stream), "cudaStreamSynchronize");
  }
  template <Scalar T>
  void all_reduce(device_span<T> buffer) {
    all_reduce_async(buffer).wait();
  }
  template <Scalar T>
  [[nodiscard]] Request all_reduce_async(device_span<T> buffer) {
    after_compute();
    nccl_detail::check(ncclAllReduce(buffer.data(), buffer.data(), buffer.size(), nccl_detail::type<T>(), ncclSum,
                                     state_->comm, state_->stream),
                       "ncclAllReduce");
    return record();
  }

  /// Personalized all-to-all of device bytes (ncclSend/ncclRecv in one group): send and recv
  /// hold N blocks of b bytes each (N = size(), equal sizes, not overlapping); block j of send goes
  /// to rank j, block q of recv comes from rank q. On the communication stream, after the work
  /// queued on the compute stream; blocking. Bad sizes throw std::invalid_argument. NCCL does not
  /// check that the ranks call the same collective.
  void all_to_all(device_span<const std::byte> send, device_span<std::byte> recv) {
    all_to_all_async(send, recv).wait();
  }
  /// all_to_all, returning at once: both buffers belong to the communicator until wait() returns.
  [[nodiscard]] Request all_to_all_async(device_span<const std::byte> send, device_span<std::byte> recv) {
    const std::size_t b = detail::byte_block(true, "cocod::comm::Nccl::all_to_all", send, recv, size(), rank());
    after_compute();
    if (b == 0) return record();  // nothing moves (every rank has b = 0)
    nccl_detail::check(ncclGroupStart(), "ncclGroupStart");
    for (int q = 0; q < size(); ++q) {
      const std::size_t at = static_cast<std::size_t>(q) * b;
      ncclResult_t e = ncclSend(send.data() + at, b, ncclUint8, q, state_->comm, state_->stream);
      if (e == ncclSuccess) e = ncclRecv(recv.data() + at, b, ncclUint8, q, state_->comm, state_->stream);
      if (e != ncclSuccess) {
        ncclGroupEnd();  // close the group before reporting
        nccl_detail::check(e, "ncclSend/ncclRecv");
      }
    }
    nccl_detail::check(ncclGroupEnd(), "ncclGroupEnd");
    return record();
  }
  /// All-gather of device bytes (ncclAllGather of ncclUint8): send is one block of b bytes, recv
  /// N blocks; block q of recv is rank q's send. send may be recv's block rank() (in place);
  /// otherwise they must not overlap. Blocking.
  void all_gather(device_span<const std::byte> send, device_span<std::byte> recv) {
    all_gather_async(send, recv).wait();
  }
  /// all_gather, returning at once: both buffers belong to the communicator until wait() returns.
  [[nodiscard]] Request all_gather_async(device_span<const std::byte> send, device_span<std::byte> recv) {
    const std::size_t b = detail::byte_block(false, "cocod::comm::Nccl::all_gather", send, recv, size(), rank());
    after_compute();
    if (b == 0) return record();
    nccl_detail::check(ncclAllGather(send.data(), recv.data(), b, ncclUint8, state_->comm, state_->stream),
                       "ncclAllGather");
    return record();
  }

  // Host buffers: through the device scratch buffer, blocking.
  template <Scalar T>
  void broadcast(std::span<T> buffer, int root) {
    host_collective(buffer, [&](device_span<T> d) { broadcast(d, root); });
  }
  template <Scalar T>
  void all_reduce(std::span<T> buffer) {
    host_collective(buffer, [&](device_span<T> d) { all_reduce(d); });
  }
  template <Scalar T>
  [[nodiscard]] Request all_reduce_async(std::span<T> buffer) {
    all_reduce(buffer);
    return Request::completed_now();
  }

 private:
  explicit Nccl(std::shared_ptr<nccl_detail::Handles> s) : state_(std::move(s)) {}

  Request record() { return Request::recorded_on(state_->stream); }
  void after_compute() { state_->after_compute(); }

  template <class T, class F>
  void host_collective(std::span<T> buffer, F op) {
    const std::size_t bytes = buffer.size_bytes();
    T* d = static_cast<T*>(state_->scratch_of(bytes));
    nccl_detail::check(cudaMemcpy(d, buffer.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    op(device_span<T>(d, buffer.size()));
    nccl_detail::check(cudaMemcpy(buffer.data(), d, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }

  std::shared_ptr<nccl_detail::Handles> state_;
};

}  // namespace cocod::comm
