#pragma once
// N workers as threads of one process, for tests, laptops and simulated clusters.
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/backend/device_span.hpp"
#include "cocod/backend/scalar.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/errors.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/comm/detail/byte_blocks.hpp"
#include "cocod/comm/detail/host_staging.hpp"
#include "cocod/comm/detail/thread_group.hpp"
#include "cocod/comm/detail/worker_threads.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::comm {

/// The communicator of one worker thread among N in this process. Obtain one per worker from
/// Threads::run:
///
///     cocod::comm::Threads::run(4, [&](cocod::comm::Threads comm) {
///       MyModel model{shard(data, comm.rank(), comm.size())};
///       cocod::Optimizer<MyModel, cocod::comm::Threads> opt{comm, options};
///       opt.optimize(model, cocod::Epochs{5});
///     });
///
/// Each worker has a communication thread that runs its collectives in posting order, so
/// all_reduce_async (and all_to_all_async, all_gather_async) overlaps the worker's computation.
/// Sums are taken in rank order: the result is bitwise the same whatever the thread timing.
class Threads : public detail::StagedDeviceCollectives<Threads> {
 public:
  using Request = detail::TicketRequest<detail::CollectiveQueue<detail::Job>>;

  /// Runs fn(Threads) on `workers` threads, rank r on thread r, and returns when all are done.
  /// If a worker throws, the collectives of the others fail with cocod::Aborted instead of
  /// hanging, and run rethrows the exception of the worker that failed, not the Aborted of those
  /// it stopped (the lowest rank's when several failed on their own).
  template <class F>
    requires std::is_invocable_v<F&, Threads>
  static void run(int workers, F&& fn) {
    if (workers < 1)
      throw std::invalid_argument("cocod::comm::Threads::run: workers must be >= 1 (got " +
                                  std::to_string(workers) + ")");
    auto group = std::make_shared<detail::Group>(workers);
    detail::run_workers(
        workers, [&](int r) { fn(Threads(group, r)); }, [&](const std::string& reason) { group->abort(reason); },
        [&](int r) { group->close(r); });
  }

  /// Runs fn(inner, outer) on groups x members threads, for groups of workers (comm::Grouped):
  /// thread t is member t % members of group t / members; `inner` joins the members of its
  /// group (rank: the member), `outer` the same member of every group (rank: the group). A
  /// worker that throws stops every collective of both, and run_groups rethrows as run does.
  template <class F>
    requires std::is_invocable_v<F&, Threads, Threads>
  static void run_groups(int groups, int members, F&& fn) {
    if (groups < 1 || members < 1)
      throw std::invalid_argument("cocod::comm::Threads::run_groups: " + std::string(groups < 1 ? "groups" : "members") +
                                  " must be >= 1 (got " + std::to_string(groups < 1 ? groups : members) + ")");
    std::vector<std::shared_ptr<detail::Group>> inner, outer;
    for (int g = 0; g < groups; ++g) inner.push_back(std::make_shared<detail::Group>(members));
    for (int m = 0; m < members; ++m) outer.push_back(std::make_shared<detail::Group>(groups));
    detail::run_workers(
        groups * members,
        [&](int t) { fn(Threads(inner[static_cast<std::size_t>(t / members)], t % members),
                        Threads(outer[static_cast<std::size_t>(t % members)], t / members)); },
        [&](const std::string& reason) {
          for (auto& g : inner) g->abort(reason);
          for (auto& g : outer) g->abort(reason);
        },
        [&](int t) {
          inner[static_cast<std::size_t>(t / members)]->close(t % members);
          outer[static_cast<std::size_t>(t % members)]->close(t / members);
        });
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return group_->size(); }

  template <Scalar T>
  void broadcast(std::span<T> buffer, int root) {
    detail::check_root("cocod::comm::Threads::broadcast", root, size(), " workers");
    post(detail::collective(detail::Op::broadcast, buffer, root)).wait();
  }
  /// The bytes of root's buffer, to every worker (equal sizes).
  void broadcast(std::span<std::byte> buffer, int root) {
    detail::check_root("cocod::comm::Threads::broadcast", root, size(), " workers");
    post(detail::byte_broadcast(buffer, root)).wait();
  }
  template <Scalar T>
  void all_reduce(std::span<T> buffer) {
    all_reduce_async(buffer).wait();
  }
  template <Scalar T>
  [[nodiscard]] Request all_reduce_async(std::span<T> buffer) {
    return post(detail::collective(detail::Op::all_reduce, buffer, 0));
  }

  /// Personalized all-to-all of bytes: send and recv hold N blocks of b bytes each (N = size(),
  /// equal sizes, not overlapping); block j of send goes to worker j, block q of recv comes from
  /// worker q (block rank() is a copy of one's own). Blocking. Bad sizes throw
  /// std::invalid_argument; workers that call different collectives or block sizes raise the
  /// same DistributedError, as all_reduce does.
  void all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) {
    post_bytes(detail::Op::all_to_all, "cocod::comm::Threads::all_to_all", send, recv).wait();
  }
  /// all_to_all, returning at once: both buffers belong to the communicator until wait() returns.
  /// It runs after the collectives this worker posted before it.
  [[nodiscard]] Request all_to_all_async(std::span<const std::byte> send, std::span<std::byte> recv) {
    return post_bytes(detail::Op::all_to_all, "cocod::comm::Threads::all_to_all_async", send, recv);
  }
  /// All-gather of bytes: send is one block of b bytes, recv N blocks of b bytes; block q of recv
  /// is worker q's send. send may be recv's block rank() (in place); otherwise they must not
  /// overlap. Blocking.
  void all_gather(std::span<const std::byte> send, std::span<std::byte> recv) {
    post_bytes(detail::Op::all_gather, "cocod::comm::Threads::all_gather", send, recv).wait();
  }
  /// all_gather, returning at once: both buffers belong to the communicator until wait() returns.
  [[nodiscard]] Request all_gather_async(std::span<const std::byte> send, std::span<std::byte> recv) {
    return post_bytes(detail::Op::all_gather, "cocod::comm::Threads::all_gather_async", send, recv);
  }

  /// Device buffers (needs <cocod/backend/cuda.hpp>): staged through host memory, in the same
  /// order of summation, so results equal those of host buffers.
  using StagedDeviceCollectives::all_reduce;
  using StagedDeviceCollectives::all_reduce_async;
  using StagedDeviceCollectives::broadcast;

 private:
  Threads(std::shared_ptr<detail::Group> g, int rank) : group_(std::move(g)), rank_(rank) {}
  Request post(const detail::Job& job) { return Request(&group_->channel(rank_).queue, group_->post(rank_, job)); }
  Request post_bytes(detail::Op op, const char* where, std::span<const std::byte> send, std::span<std::byte> recv) {
    const std::size_t block = detail::byte_block(op == detail::Op::all_to_all, where, send, recv, size(), rank_);
    return post(detail::byte_collective(op, send, recv, block));
  }
  std::shared_ptr<detail::Group> group_;
  int rank_ = 0;
};

}  // namespace cocod::comm
