#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/host_staging.hpp is internal: include a communicator's header"
#endif
// Host copies of device buffers, for communicators that move host memory (comm::Threads,
// comm::Mpi): a collective on a device_span copies it to a host slot, runs on the slot, and the
// request copies the result back when it is waited for. Slots are reused; they grow only.
// Memory and copies come from <cocod/backend/cuda.hpp>, found by argument-dependent lookup:
// host_staging_allocate/free (pinned memory on a GPU), copy_to_host, and copy_from_host_async
// (queued on the compute stream, so wait() does not block for it), so this header needs no
// device headers itself.
#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <utility>

#include "cocod/backend/device_span.hpp"

namespace cocod::comm::detail {

class HostStaging {
 public:
  struct Slot {
    void* host = nullptr;
    std::size_t capacity = 0;
    void (*release)(void*) = nullptr;
    void* device = nullptr;
    std::size_t count = 0;
    void (*copy_back)(Slot&) = nullptr;
    bool busy = false;
  };
  static constexpr std::size_t slots = 4;

  HostStaging() = default;
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;
  ~HostStaging() {
    for (auto& s : slots_)
      if (s.host) s.release(s.host);
  }

  /// Copies `d` to a free host slot; returns the host view and the slot to finish later.
  template <class T>
  std::pair<std::span<T>, Slot*> stage(device_span<T> d) {
    Slot* slot = nullptr;
    for (std::size_t i = 0; i < slots && !slot; ++i) {
      Slot& s = slots_[(next_ + i) % slots];
      if (!s.busy) {
        slot = &s;
        next_ = (next_ + i + 1) % slots;
      }
    }
    if (!slot)
      throw std::logic_error("cocod: more than 4 collectives on device buffers in flight on one worker");
    if (slot->capacity < d.size_bytes()) {
      // The slot has no memory from here until the allocation returns: if it throws, a later
      // smaller buffer must allocate anew, not be copied to the null pointer left behind.
      if (slot->host) slot->release(slot->host);
      slot->host = nullptr;
      slot->capacity = 0;
      slot->host = host_staging_allocate(d, d.size_bytes());
      slot->capacity = d.size_bytes();
      slot->release = +[](void* p) { host_staging_free(device_span<T>(), p); };
    }
    T* host = static_cast<T*>(slot->host);
    copy_to_host(device_span<const T>(d), host);
    slot->device = d.data();
    slot->count = d.size();
    slot->copy_back = +[](Slot& s) {
      copy_from_host_async(static_cast<const T*>(s.host), device_span<T>(static_cast<T*>(s.device), s.count));
    };
    slot->busy = true;
    return {std::span<T>(host, d.size()), slot};
  }

  /// Copies a slot's result back to its device buffer and frees the slot.
  static void finish(Slot* slot) {
    if (!slot) return;
    slot->busy = false;
    slot->copy_back(*slot);
  }

 private:
  std::array<Slot, slots> slots_{};
  std::size_t next_ = 0;
};

/// The device_span collectives of a communicator Comm whose own collectives move host memory
/// (CRTP base of comm::Threads and comm::Mpi): stage, run Comm's host collective, copy back.
/// Comm's Request is a TicketRequest (whose `staged_` slot this class sets), and Comm must bring
/// these overloads beside its own with using-declarations.
template <class Comm>
class StagedDeviceCollectives {
 public:
  template <class T>
  void broadcast(device_span<T> buffer, int root) {
    auto [host, slot] = staging_->stage(buffer);
    self().broadcast(host, root);
    HostStaging::finish(slot);
  }
  template <class T>
  void all_reduce(device_span<T> buffer) {
    all_reduce_async(buffer).wait();
  }
  template <class T>
  [[nodiscard]] auto all_reduce_async(device_span<T> buffer) {
    auto [host, slot] = staging_->stage(buffer);
    auto request = self().all_reduce_async(host);
    request.staged_ = slot;
    return request;
  }

 private:
  Comm& self() noexcept { return static_cast<Comm&>(*this); }
  // Shared by copies of one communicator handle, used only by the worker that owns it.
  std::shared_ptr<HostStaging> staging_ = std::make_shared<HostStaging>();
};

}  // namespace cocod::comm::detail
