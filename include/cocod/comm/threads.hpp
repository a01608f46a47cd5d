#pragma once
// N workers as threads of one process, for tests, laptops and simulated clusters.
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/comm/communicator.hpp"
#include "cocod/errors.hpp"
#include "cocod/model/concepts.hpp"
#include "cocod/backend/device_span.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/comm/detail/host_staging.hpp"
#include "cocod/comm/detail/thread_group.hpp"
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
/// all_reduce_async overlaps the worker's computation. Sums are taken in rank order: the result
/// is bitwise the same whatever the thread timing.
class Threads : public detail::StagedDeviceCollectives<Threads> {
 public:
  using Request = detail::TicketRequest<detail::Channel>;

  /// Runs fn(Threads) on `workers` threads, rank r on thread r, and returns when all are done.
  /// If a worker throws, the collectives of the others fail with cocod::Aborted instead of
  /// hanging, and run rethrows the first worker's own exception (lowest rank first).
  template <class F>
    requires std::is_invocable_v<F&, Threads>
  static void run(int workers, F&& fn) {
    if (workers < 1)
      throw std::invalid_argument("cocod::comm::Threads::run: workers must be >= 1 (got " +
                                  std::to_string(workers) + ")");
    auto group = std::make_shared<detail::Group>(workers);
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
    std::vector<char> aborted(static_cast<std::size_t>(workers), 0);  // not vector<bool>: written from several threads
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(workers));
    for (int r = 0; r < workers; ++r) {
      threads.emplace_back([&, r] {
        const auto i = static_cast<std::size_t>(r);
        try {
          fn(Threads(group, r));
        } catch (const Aborted&) {
          errors[i] = std::current_exception();
          aborted[i] = 1;
          group->abort("worker " + std::to_string(r) + " stopped");
        } catch (const std::exception& e) {
          errors[i] = std::current_exception();
          group->abort("worker " + std::to_string(r) + " failed: " + e.what());
        } catch (...) {
          errors[i] = std::current_exception();
          group->abort("worker " + std::to_string(r) + " failed");
        }
        group->close(r);
      });
    }
    for (auto& t : threads) t.join();
    for (std::size_t i = 0; i < errors.size(); ++i)
      if (errors[i] && !aborted[i]) std::rethrow_exception(errors[i]);
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return group_->size(); }

  template <Scalar T>
  void broadcast(std::span<T> buffer, int root) {
    if (root < 0 || root >= size())
      throw std::invalid_argument("cocod::comm::Threads::broadcast: root " + std::to_string(root) +
                                  " is not a rank of " + std::to_string(size()) + " workers");
    Request(&group_->channel(rank_), group_->post(rank_, job<T>(detail::Op::broadcast, buffer, root))).wait();
  }
  template <Scalar T>
  void all_reduce(std::span<T> buffer) {
    all_reduce_async(buffer).wait();
  }
  template <Scalar T>
  [[nodiscard]] Request all_reduce_async(std::span<T> buffer) {
    return Request(&group_->channel(rank_), group_->post(rank_, job<T>(detail::Op::all_reduce, buffer, 0)));
  }

  /// Device buffers (needs <cocod/backend/cuda.hpp>): staged through host memory, in the same
  /// order of summation, so results equal those of host buffers.
  using StagedDeviceCollectives::all_reduce;
  using StagedDeviceCollectives::all_reduce_async;
  using StagedDeviceCollectives::broadcast;

 private:
  Threads(std::shared_ptr<detail::Group> g, int rank) : group_(std::move(g)), rank_(rank) {}
  template <class T>
  static detail::Job job(detail::Op op, std::span<T> b, int root) {
    return detail::Job{op, std::is_same_v<T, double>, b.data(), b.size(), root};
  }
  std::shared_ptr<detail::Group> group_;
  int rank_ = 0;
};

}  // namespace cocod::comm
