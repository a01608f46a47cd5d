#pragma once
// The rendezvous store's server: keys and values in memory, served over TCP to rendezvous::TcpStore
// clients (comm::Gloo's workers find each other through it). The coordinator program serves
// one; comm::GlooOptions::serve_store has rank 0 serve one in-process; tests start their own.
//
//     cocod::rendezvous::StoreServer server{"", 29500};   // every interface, port 29500
//     ... server.port() ...                         // the port (useful with port 0)
//
// One thread per connection (a run has tens of workers, not thousands). Nothing a client sends
// is trusted: every connection first says hello with the run's token (StoreOptions::token; a
// wrong one, or none within hello_timeout, closes it), every field is read against a bound, the
// values stored have a quota, a malformed request closes that connection only, and an owner
// (the coordinator) may refuse any request by its own rule (set_guard). stop() or the
// destructor closes every connection, so that a client waiting in get() learns it at once.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#define COCOD_INTERNAL_INCLUDE
#include "cocod/rendezvous/detail/connections.hpp"
#include "cocod/rendezvous/detail/messages.hpp"
#include "cocod/rendezvous/detail/socket.hpp"
#include "cocod/rendezvous/detail/table.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::rendezvous {

/// The bounds of a StoreServer and the secret its clients must know.
struct StoreOptions {
  /// The run's shared secret: a client must present it (TcpStore's token) or is disconnected.
  /// Empty: any client that speaks the protocol is served (a trusted network only).
  std::string token{};
  std::size_t max_key_bytes = 1024;         ///< per key
  std::size_t max_value_bytes = 1 << 20;    ///< per value
  std::size_t max_stored_bytes = 64 << 20;  ///< every key and value held (a set beyond it is refused)
  std::size_t max_connections = 512;        ///< more are closed as they arrive
  /// A connection that has not said hello within this long is closed.
  std::chrono::milliseconds hello_timeout = std::chrono::seconds(10);
};

class StoreServer {
 public:
  using Values = tcp::Table::Values;
  /// What a connection proved of itself, for a guard: the key it claimed (with its secret), and
  /// the guard's own mark (e.g. the worker it speaks for).
  struct Client {
    std::string claimed{};
    std::int64_t mark = 0;
  };
  /// An owner's rule: called (under the server's lock, with every value) for each request after
  /// hello; returns why it is refused, or an empty string to serve it.
  using Guard = std::function<std::string(Client&, const tcp::Request&, const Values&)>;

  /// Listens on `bind_host`:`port` (empty host: every interface; port 0: one the system picks,
  /// see port()). Throws cocod::CommunicationError when it cannot listen.
  StoreServer(const std::string& bind_host, int port, StoreOptions options = {})
      : options_(std::move(options)), table_(options_.max_stored_bytes) {
    auto [socket, actual] = tcp::listen_on(bind_host, port, "cocod::rendezvous::StoreServer");
    port_ = actual;
    connections_.emplace(std::move(socket), options_.max_connections, options_.hello_timeout, [this](int fd) { serve(fd); });
  }
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  ~StoreServer() { stop(); }

  /// The port it listens on.
  [[nodiscard]] int port() const noexcept { return port_; }

  /// Every request after hello is first put to `guard` (set it before any client connects).
  void set_guard(Guard guard) {
    std::lock_guard lock(mutex_);
    guard_ = std::move(guard);
  }

  /// Closes the listener and every connection and waits for their threads; clients then fail
  /// with "the store ... closed the connection". Idempotent.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;  // (a request waiting for a key ends)
    }
    changed_.notify_all();
    connections_->stop();
  }

  /// The value of `key` if it is set (for the coordinator and tests).
  [[nodiscard]] bool lookup(const std::string& key, std::vector<char>& out) const {
    std::lock_guard lock(mutex_);
    const auto* value = table_.find(key);
    if (value) out = *value;
    return value != nullptr;
  }
  /// Sets `key` as a client's set() would (waking whoever waits for it); the owner's writes are
  /// not bounded by the quota.
  void assign(const std::string& key, std::vector<char> value) {
    {
      std::lock_guard lock(mutex_);
      table_.set(key, std::move(value));
    }
    changed_.notify_all();
  }
  /// Every key that begins with `prefix`, with its value.
  [[nodiscard]] Values with_prefix(const std::string& prefix) const {
    std::lock_guard lock(mutex_);
    return table_.with_prefix(prefix);
  }
  /// Forgets every key that begins with `prefix` (what nobody reads any more: an elastic run's
  /// past epochs), so that a long run stays within max_stored_bytes. Returns how many it forgot.
  std::size_t erase_prefix(const std::string& prefix) {
    std::lock_guard lock(mutex_);
    return table_.erase_prefix(prefix);
  }
  /// How many times a value was set so far; wait_for_change(v, t) returns once it is past v, or after t.
  [[nodiscard]] std::uint64_t version() const {
    std::lock_guard lock(mutex_);
    return table_.version();
  }
  void wait_for_change(std::uint64_t seen, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return stopping_ || table_.version() != seen; });
  }
  /// The bytes of every key and value held, and the connections open (for tests and monitoring).
  [[nodiscard]] std::size_t stored_bytes() const {
    std::lock_guard lock(mutex_);
    return table_.bytes();
  }
  [[nodiscard]] std::size_t connections() const { return connections_->open(); }

 private:
  // One client's requests, answered in order, until it disconnects, sends a malformed request,
  // or the server stops. A connection that claimed a key sets "<key>/closed" when it ends (its
  // process is gone).
  void serve(int fd) {
    const tcp::RequestLimits limits{options_.max_key_bytes, options_.max_value_bytes};
    tcp::Request request;
    Client client;
    if (tcp::recv_request(fd, request, limits) && tcp::hello_accepted(request, options_.token)) {
      tcp::set_receive_timeout(fd, std::chrono::milliseconds(0));
      bool fine = tcp::send_reply(fd, {});
      while (fine && tcp::recv_request(fd, request, limits)) {
        std::optional<tcp::Reply> reply = answer(fd, client, request);
        fine = reply && tcp::send_reply(fd, *reply);
      }
    } else {
      (void)tcp::send_reply(fd, {tcp::Status::refused, to_bytes("the store refused this client: another protocol, or not the run's token")});
    }
    {
      std::lock_guard lock(mutex_);
      if (stopping_ || client.claimed.empty()) return;
      table_.set(client.claimed + "/closed", {'1'});
    }
    changed_.notify_all();
  }
  static std::vector<char> to_bytes(const std::string& s) { return {s.begin(), s.end()}; }

  // Waits (the lock held) until `ready`, the deadline, the server's stop, or the client's leaving
  // (nullopt); true when ready or stopping.
  template <class Ready>
  std::optional<bool> wait_until(std::unique_lock<std::mutex>& lock, int fd, tcp::SteadyClock::time_point deadline, Ready ready) {
    for (;;) {
      const auto slice = std::min(deadline, tcp::SteadyClock::now() + std::chrono::milliseconds(50));
      if (changed_.wait_until(lock, slice, [&] { return stopping_ || ready(); })) return true;
      if (tcp::SteadyClock::now() >= deadline) return false;
      if (tcp::peer_gone(fd)) return std::nullopt;
    }
  }

  // The reply to one request; nullopt for a malformed one (its connection is closed).
  std::optional<tcp::Reply> answer(int fd, Client& client, const tcp::Request& r) {
    std::unique_lock lock(mutex_);
    const auto refused = [](const std::string& why) { return tcp::Reply{tcp::Status::refused, to_bytes(why)}; };
    const auto full = [&] { return refused("the store is full (" + std::to_string(table_.max_bytes()) + " bytes)"); };
    if (!tcp::well_formed(r)) return std::nullopt;
    if (guard_)
      if (std::string why = guard_(client, r, table_.values()); !why.empty()) return refused(why);
    switch (r.verb) {
      case tcp::Verb::claim:
        client.claimed = r.key;
        return tcp::Reply{};
      case tcp::Verb::set:
        if (!table_.fits(r.key, r.value.size())) return full();
        table_.set(r.key, r.value);
        changed_.notify_all();
        return tcp::Reply{};
      case tcp::Verb::add: {
        const auto* old = table_.find(r.key);
        if (old && old->size() != sizeof(std::int64_t)) return refused("'" + r.key + "' holds no integer");
        std::int64_t sum = 0;
        if (__builtin_add_overflow(old ? tcp::value_int(*old) : 0, tcp::value_int(r.value), &sum))
          return refused("'" + r.key + "' would overflow");
        if (!table_.fits(r.key, sizeof sum)) return full();
        table_.set(r.key, tcp::int_value(sum));
        changed_.notify_all();
        return tcp::Reply{tcp::Status::ok, tcp::int_value(sum)};
      }
      case tcp::Verb::try_get: {
        const auto* value = table_.find(r.key);
        if (!value) return tcp::Reply{tcp::Status::missing, {}};
        return tcp::Reply{tcp::Status::ok, *value};
      }
      case tcp::Verb::get: {
        const auto deadline = tcp::SteadyClock::now() + tcp::wait_of(tcp::value_int(r.value));
        const std::optional<bool> ready = wait_until(lock, fd, deadline, [&] { return table_.contains(r.key); });
        if (!ready) return std::nullopt;
        if (!*ready) return tcp::Reply{tcp::Status::timed_out, {}};
        if (stopping_) return tcp::Reply{tcp::Status::stopping, {}};
        return tcp::Reply{tcp::Status::ok, *table_.find(r.key)};
      }
      case tcp::Verb::wait: {
        const auto deadline = tcp::SteadyClock::now() + tcp::wait_of(*tcp::parse_count(r.key));
        const auto all_set = [&] {
          for (std::size_t b = 0; b < r.value.size();) {
            const std::string key(r.value.data() + b);
            if (!table_.contains(key)) return false;
            b += key.size() + 1;
          }
          return true;
        };
        const std::optional<bool> ready = wait_until(lock, fd, deadline, all_set);
        if (!ready) return std::nullopt;
        if (!*ready) return tcp::Reply{tcp::Status::timed_out, {}};
        return tcp::Reply{stopping_ ? tcp::Status::stopping : tcp::Status::ok, {}};
      }
      case tcp::Verb::hello: break;
    }
    return std::nullopt;
  }
  StoreOptions options_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  tcp::Table table_;  // (guarded by mutex_)
  Guard guard_;
  int port_ = 0;
  bool stopping_ = false;
  std::optional<tcp::Connections> connections_;  // (last: its threads serve with the members above)
};

}  // namespace cocod::rendezvous

namespace cocod::comm {  // (the names of earlier versions, beside comm::Gloo)
using rendezvous::StoreOptions;
using rendezvous::StoreServer;
}  // namespace cocod::comm
