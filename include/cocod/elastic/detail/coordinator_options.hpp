#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/elastic/detail/coordinator_options.hpp is internal: include <cocod/elastic/coordinator.hpp>"
#endif
// The settings of an elastic run's coordinator.
#include <chrono>
#include <string>

#include "cocod/rendezvous/store_server.hpp"
#include "cocod/errors.hpp"

namespace cocod::elastic {

/// Settings of an elastic run's Coordinator (the cocod-coordinator program's flags).
struct CoordinatorOptions {
  std::string bind{};  ///< the interface to listen on (empty: every one)
  int port = 29500;    ///< 0: one the system picks (Coordinator::port())
  /// The run waits until this many workers are alive, at the start and after a loss.
  int min_workers = 1;
  /// A worker whose heart has not beaten for this long is expelled (a stopped or hung process;
  /// a process that ended is noticed at once, by its closed connection).
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(2);
  /// The first epoch forms once min_workers are alive and nobody joined for this long (so that
  /// workers started together begin together).
  std::chrono::milliseconds first_epoch_grace = std::chrono::milliseconds(500);
  std::string prefix = "elastic/";
  std::string log_path{};  ///< also append the membership log to this file (empty: only in the store)
  /// The run's shared secret: every worker presents it (MemberOptions::token), any other client
  /// is disconnected. Empty: any client that reaches the port is served (a trusted network only).
  std::string token{};
  /// The store's bounds (its token is `token`).
  rendezvous::StoreOptions store{};
};

namespace detail {
inline CoordinatorOptions checked(CoordinatorOptions o) {
  if (o.min_workers < 1) invalid_setting("cocod::elastic::CoordinatorOptions", "min_workers", "must be >= 1", o.min_workers);
  if (o.heartbeat_timeout.count() <= 0)
    invalid_setting("cocod::elastic::CoordinatorOptions", "heartbeat_timeout", "must be > 0 ms", o.heartbeat_timeout.count());
  if (o.prefix.empty() || o.prefix.back() != '/') invalid_setting("cocod::elastic::CoordinatorOptions", "prefix", "must end with '/'", o.prefix);
  return o;
}
inline rendezvous::StoreOptions store_options(const CoordinatorOptions& o) {
  rendezvous::StoreOptions s = o.store;
  s.token = o.token;
  return s;
}
}  // namespace detail

}  // namespace cocod::elastic
