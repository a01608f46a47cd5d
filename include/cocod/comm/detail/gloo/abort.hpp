#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/gloo/abort.hpp is internal: include <cocod/comm/gloo.hpp>"
#endif
// The handle that ends a comm::Gloo from another thread, its connection set-up included.
#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>

#include <atomic>
#include <memory>
#include <mutex>

namespace cocod::comm {

namespace gloo_detail {
struct SetUp;
}

/// Ends a comm::Gloo from any thread: Gloo::abort() without the communicator, so usable while
/// its constructor still connects (an elastic epoch replaced while its members set it up). An
/// abort during the set-up ends the waits for the peers' addresses within 50 ms and closes the
/// pairs being connected (which ends a connect in progress); the constructor then throws
/// cocod::Aborted. After it, every collective throws cocod::PeerLost, as after Gloo::abort().
class GlooAbort {
 public:
  void abort() noexcept {
    aborted_ = true;
    std::lock_guard lock(mutex_);
    close_pairs();
  }
  [[nodiscard]] bool aborted() const noexcept { return aborted_; }

 private:
  friend struct gloo_detail::SetUp;
  // The pairs of a set-up in progress, every one created (an abort closes them); null after it.
  void connecting(std::shared_ptr<::gloo::transport::Context> context) {
    std::lock_guard lock(mutex_);
    connecting_ = std::move(context);
    if (aborted_) close_pairs();  // (aborted before the pairs were known)
  }
  void close_pairs() noexcept {
    if (!connecting_) return;
    for (int peer = 0; peer < connecting_->size; ++peer)
      if (peer != connecting_->rank)
        if (auto& pair = connecting_->getPair(peer)) pair->close();
  }

  std::atomic<bool> aborted_{false};
  std::mutex mutex_;
  std::shared_ptr<::gloo::transport::Context> connecting_;
};

}  // namespace cocod::comm
