#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/gloo/mesh.hpp is internal: include <cocod/comm/gloo.hpp>"
#endif
// A comm::Gloo's connections: a Gloo context with a pair connected to each peer, found through
// the rendezvous store. Each rank posts its pairs' addresses (PREFIX/mesh/RANK/PEER), then
// connects them in peer order (a pair's listening side accepts in Gloo's device loop, so no
// order deadlocks). A GlooAbort ends it from another thread: the waits for an address look every
// 50 ms, and the abort closes the pairs, which ends a connect in progress. Each connect waits at
// most connect_timeout (with peers that never connect, the set-up may take that per peer).
#include <gloo/context.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cocod/comm/detail/gloo/abort.hpp"
#include "cocod/comm/detail/gloo/options.hpp"
#include "cocod/rendezvous/tcp_store.hpp"
#include "cocod/errors.hpp"

namespace cocod::comm::gloo_detail {

// What the set-up tells a GlooAbort: the pairs it connects (null once done), for the abort to close.
struct SetUp {
  static void connecting(GlooAbort& abort, std::shared_ptr<::gloo::transport::Context> pairs) { abort.connecting(std::move(pairs)); }
};

// A Gloo context over pairs connected by connect_mesh().
struct Mesh : ::gloo::Context {
  Mesh(int rank, int size, std::shared_ptr<::gloo::transport::Device> device, std::shared_ptr<::gloo::transport::Context> pairs,
       std::chrono::milliseconds timeout)
      : ::gloo::Context(rank, size) {
    device_ = std::move(device);
    transportContext_ = std::move(pairs);
    setTimeout(timeout);
  }
};

inline std::shared_ptr<::gloo::Context> connect_pairs(const GlooOptions& o, rendezvous::TcpStore& store, GlooAbort& abort,
                                                      std::shared_ptr<::gloo::transport::Device> device) {
  using Clock = std::chrono::steady_clock;
  std::shared_ptr<::gloo::transport::Context> pairs = device->createContext(o.rank, o.size);
  // (a pair waits 5 times its timeout for its peer's connection: at most connect_timeout)
  pairs->setTimeout(std::max(o.connect_timeout / 5, std::chrono::milliseconds(1)));
  const auto key = [&](int from, int to) { return o.prefix + "/mesh/" + std::to_string(from) + "/" + std::to_string(to); };
  for (int peer = 0; peer < o.size; ++peer)
    if (peer != o.rank) store.set(key(o.rank, peer), pairs->createPair(peer)->address().bytes());
  SetUp::connecting(abort, pairs);
  const auto deadline = Clock::now() + o.connect_timeout;
  const auto ended = [&] {
    if (abort.aborted()) throw Aborted("aborted");
  };
  for (int peer = 0; peer < o.size; ++peer) {
    if (peer == o.rank) continue;
    std::optional<std::vector<char>> address;
    while (ended(), !(address = store.try_get(key(peer, o.rank)))) {
      if (Clock::now() > deadline) throw CommunicationError("rank " + std::to_string(peer) + " did not post its address (is it started?)");
      (void)store.wait_for({key(peer, o.rank)}, std::chrono::milliseconds(50));
    }
    pairs->getPair(peer)->connect(*address);
  }
  ended();
  SetUp::connecting(abort, nullptr);
  return std::make_shared<Mesh>(o.rank, o.size, std::move(device), std::move(pairs), o.connect_timeout);
}

/// The connected context; throws cocod::Aborted when `abort` ended it, CommunicationError when a
/// peer could not be reached (naming the store and the timeout).
inline std::shared_ptr<::gloo::Context> connect_mesh(const GlooOptions& o, rendezvous::TcpStore& store, GlooAbort& abort) {
  ::gloo::transport::tcp::attr attr;
  attr.hostname = o.hostname;
  attr.iface = o.interface;
  try {
    return connect_pairs(o, store, abort, ::gloo::transport::tcp::CreateDevice(attr));
  } catch (const std::exception& e) {  // Gloo's, or the store's (CommunicationError)
    SetUp::connecting(abort, nullptr);
    if (abort.aborted()) throw Aborted("cocod::comm::Gloo: rank " + std::to_string(o.rank) + ": its connection set-up was ended (abort)");
    throw CommunicationError("cocod::comm::Gloo: rank " + std::to_string(o.rank) + " could not connect to its " +
                             std::to_string(o.size - 1) + " peers through the store at " + store.address() + " within " +
                             std::to_string(o.connect_timeout.count()) + " ms: " + e.what());
  }
}

}  // namespace cocod::comm::gloo_detail
