#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/gloo/options.hpp is internal: include <cocod/comm/gloo.hpp>"
#endif
// The settings of comm::Gloo: where the rendezvous store is, who this worker is, how peers reach
// it, and how long a collective may wait.
#include <chrono>
#include <stdexcept>
#include <string>

#include "cocod/errors.hpp"

namespace cocod::comm {

/// Settings of comm::Gloo.
struct GlooOptions {
  /// "host:port" of the rendezvous store: the coordinator program, or rank 0 (serve_store).
  std::string store{};
  /// This worker's rank in [0, size), and the number of workers.
  int rank = -1;
  int size = 0;
  /// rank 0 serves the store itself, listening on the store address's port on every interface;
  /// no other program is needed (the others retry until it listens, up to connect_timeout).
  bool serve_store = false;
  /// The run's shared secret, presented to the store (and, with serve_store, required of every
  /// client of the store rank 0 serves). Empty: none.
  std::string token{};
  /// The keys of this run in the store: runs that share a store need different prefixes.
  std::string prefix = "cocod";
  /// The address the peers reach this worker at (Gloo's TCP device): a host name or IP address,
  /// or `interface`, a network interface's name ("eth0"). Both empty: this machine's host name.
  std::string hostname{};
  std::string interface{};
  /// How long the workers may take to find each other (all started and connected).
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(60);
  /// A collective that has not completed after this long throws cocod::Aborted on every rank that
  /// waits (a peer stopped, hangs, or computes far longer than the others): the last resort
  /// against a job that would wait forever. Zero or negative: a year.
  std::chrono::milliseconds stall_timeout = std::chrono::seconds(300);
};

namespace gloo_detail {

/// Throws std::invalid_argument naming the field when comm::Gloo cannot use `o`; returns it with
/// the stall timeout made explicit.
[[nodiscard]] inline GlooOptions checked(GlooOptions o) {
  const std::string type = "cocod::comm::GlooOptions";
  if (o.store.empty()) invalid_setting(type, "store", "must be HOST:PORT of the rendezvous store", "''");
  if (o.size < 1) invalid_setting(type, "size", "must be >= 1", o.size);
  if (o.rank < 0 || o.rank >= o.size)
    invalid_setting(type, "rank", "must be in [0, size = " + std::to_string(o.size) + ")", o.rank);
  if (o.prefix.empty()) invalid_setting(type, "prefix", "must not be empty", "''");
  if (o.connect_timeout.count() <= 0) invalid_setting(type, "connect_timeout", "must be > 0 ms", o.connect_timeout.count());
  if (o.stall_timeout.count() <= 0) o.stall_timeout = std::chrono::hours(24 * 365);
  return o;
}

}  // namespace gloo_detail

}  // namespace cocod::comm
