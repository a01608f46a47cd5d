#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/host_staging.hpp is internal: include a communicator's header"
#endif
// Host copies of device buffers, for communicators that move host memory (comm::Threads,
// comm::Mpi): a collective on a device_span copies it to a host slot, runs on the slot, and the
// request copies the result back when it is waited for. Slots are reused; they grow only.
// The copies are cocod::copy_to_host / copy_from_host, found by argument-dependent lookup in
// <cocod/backend/cuda.hpp>, so this header needs no device headers itself.
#include <array>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "cocod/backend/device_span.hpp"

namespace cocod::comm::detail {

class HostStaging {
 public:
  struct Slot {
    std::vector<std::byte> host;
    void* device = nullptr;
    std::size_t count = 0;
    void (*copy_back)(Slot&) = nullptr;
    bool busy = false;
  };
  static constexpr std::size_t slots = 4;

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
    if (slot->host.size() < d.size_bytes()) slot->host.resize(d.size_bytes());
    T* host = reinterpret_cast<T*>(slot->host.data());
    copy_to_host(device_span<const T>(d), host);
    slot->device = d.data();
    slot->count = d.size();
    slot->copy_back = +[](Slot& s) {
      copy_from_host(static_cast<const T*>(static_cast<const void*>(s.host.data())),
                     device_span<T>(static_cast<T*>(s.device), s.count));
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

}  // namespace cocod::comm::detail
