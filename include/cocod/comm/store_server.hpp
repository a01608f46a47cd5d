#pragma once
// The rendezvous store's server: keys and values in memory, served over TCP to comm::TcpStore
// clients (comm::Gloo's workers find each other through it). The coordinator program serves
// one; comm::GlooOptions::serve_store has rank 0 serve one in-process; tests start their own.
//
//     cocod::comm::StoreServer server{"", 29500};   // every interface, port 29500
//     ... server.port() ...                         // the port (useful with port 0)
//
// One thread per connection (a run has tens of workers, not thousands). Nothing a client sends
// is trusted: every connection first says hello with the run's token (StoreOptions::token; a
// wrong one, or none within hello_timeout, closes it), every field is read against a bound, the
// values stored have a quota, a malformed request closes that connection only, and an owner
// (the coordinator) may refuse any request by its own rule (set_guard). stop() or the
// destructor closes every connection, so that a client waiting in get() learns it at once.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#define COCOD_INTERNAL_INCLUDE
#include "cocod/comm/detail/tcp/messages.hpp"
#include "cocod/comm/detail/tcp/socket.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::comm {

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
  using Values = std::map<std::string, std::vector<char>>;
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
  StoreServer(const std::string& bind_host, int port, StoreOptions options = {}) : options_(std::move(options)) {
    auto [socket, actual] = tcp::listen_on(bind_host, port, "cocod::comm::StoreServer");
    listener_ = std::move(socket);
    port_ = actual;
    acceptor_ = std::thread([this] { accept_loop(); });
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
      stopping_ = true;
      listener_.shutdown();
      for (Connection& c : connections_) c.socket.shutdown();
    }
    changed_.notify_all();
    if (acceptor_.joinable()) acceptor_.join();
    for (Connection& c : connections_)
      if (c.thread.joinable()) c.thread.join();
  }

  /// The value of `key` if it is set (for the coordinator and tests).
  [[nodiscard]] bool lookup(const std::string& key, std::vector<char>& out) const {
    std::lock_guard lock(mutex_);
    const auto it = values_.find(key);
    if (it == values_.end()) return false;
    out = it->second;
    return true;
  }
  /// Sets `key` as a client's set() would (waking whoever waits for it); the owner's writes are
  /// not bounded by the quota.
  void assign(const std::string& key, std::vector<char> value) {
    {
      std::lock_guard lock(mutex_);
      store(key, std::move(value));
    }
    changed_.notify_all();
  }
  /// Every key that begins with `prefix`, with its value.
  [[nodiscard]] Values with_prefix(const std::string& prefix) const {
    std::lock_guard lock(mutex_);
    Values out;
    for (auto it = values_.lower_bound(prefix); it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
      out.insert(*it);
    return out;
  }
  /// Forgets every key that begins with `prefix` (what nobody reads any more: an elastic run's
  /// past epochs), so that a long run stays within max_stored_bytes. Returns how many it forgot.
  std::size_t erase_prefix(const std::string& prefix) {
    std::lock_guard lock(mutex_);
    std::size_t erased = 0;
    auto it = values_.lower_bound(prefix);
    while (it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
      stored_bytes_ -= it->first.size() + it->second.size();
      it = values_.erase(it);
      ++erased;
    }
    return erased;
  }
  /// How many times a value was set so far; wait_for_change(v, t) returns once it is past v, or after t.
  [[nodiscard]] std::uint64_t version() const {
    std::lock_guard lock(mutex_);
    return version_;
  }
  void wait_for_change(std::uint64_t seen, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return stopping_ || version_ != seen; });
  }
  /// The bytes of every key and value held, and the connections open (for tests and monitoring).
  [[nodiscard]] std::size_t stored_bytes() const {
    std::lock_guard lock(mutex_);
    return stored_bytes_;
  }
  [[nodiscard]] std::size_t connections() const {
    std::lock_guard lock(mutex_);
    std::size_t open = 0;
    for (const Connection& c : connections_) open += c.done ? 0 : 1;
    return open;
  }

 private:
  struct Connection {
    tcp::Socket socket;
    std::thread thread;
    bool done = false;  // its thread is about to return (guarded by mutex_)
  };

  void accept_loop() {
    for (;;) {
      const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      const int error = errno;
      if (fd < 0 && (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM)) {
        // out of descriptors or memory: wait for connections to end rather than spin
        std::unique_lock lock(mutex_);
        reap();
        if (changed_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stopping_; })) return;
        continue;
      }
      std::lock_guard lock(mutex_);
      if (stopping_) {
        if (fd >= 0) ::close(fd);
        return;
      }
      if (fd < 0) continue;  // a connection reset before it was accepted, or EINTR
      reap();
      if (connections_.size() >= options_.max_connections) {  // full: this one is closed
        ::close(fd);
        continue;
      }
      tcp::set_no_delay(fd);
      set_receive_timeout(fd, options_.hello_timeout);  // until hello
      connections_.push_back(Connection{tcp::Socket(fd), {}, false});
      Connection& c = connections_.back();
      try {
        c.thread = std::thread([this, &c] { serve(c); });
      } catch (const std::system_error&) {  // no thread to be had: this connection is closed
        connections_.pop_back();
      }
    }
  }
  static void set_receive_timeout(int fd, std::chrono::milliseconds t) noexcept {
    timeval tv{};  // (zero: none)
    tv.tv_sec = static_cast<time_t>(t.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }

  // One client's requests, answered in order, until it disconnects, sends a malformed request,
  // or the server stops. A connection that claimed a key sets "<key>/closed" when it ends (its
  // process is gone).
  void serve(Connection& c) {
    const int fd = c.socket.fd();
    const tcp::RequestLimits limits{options_.max_key_bytes, options_.max_value_bytes};
    tcp::Request request;
    Client client;
    if (tcp::recv_request(fd, request, limits) && hello(request)) {
      set_receive_timeout(fd, std::chrono::milliseconds(0));
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
      c.socket.close();  // (the client learns at once; stop() shuts only the open ones, under the same lock)
      c.done = true;     // reaped by the next accept
      if (stopping_ || client.claimed.empty()) return;
      store(client.claimed + "/closed", {'1'});
    }
    changed_.notify_all();
  }
  static std::vector<char> to_bytes(const std::string& s) { return {s.begin(), s.end()}; }

  // Whether a connection's first request is a hello of this protocol with the run's token
  // (compared in constant time: its duration tells nothing of how much of it matched).
  [[nodiscard]] bool hello(const tcp::Request& r) const noexcept {
    if (r.verb != tcp::Verb::hello || r.key != tcp::kProtocol) return false;
    const std::string& token = options_.token;
    unsigned char diff = r.value.size() == token.size() ? 0 : 1;
    for (std::size_t i = 0; i < r.value.size(); ++i)
      diff |= static_cast<unsigned char>(r.value[i] ^ (token.empty() ? 0 : token[i % token.size()]));
    return diff == 0;
  }
  // Joins and forgets the connections that ended (the lock held): a coordinator that outlives
  // many workers keeps no thread per past connection.
  void reap() {
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      it->thread.join();  // (it has set done under the lock we hold and only returns after)
      it = connections_.erase(it);
    }
  }
  // Sets a value (the lock held), counting the bytes held.
  void store(const std::string& key, std::vector<char> value) {
    auto [it, added] = values_.try_emplace(key);
    stored_bytes_ -= added ? 0 : key.size() + it->second.size();
    stored_bytes_ += key.size() + value.size();
    it->second = std::move(value);
    ++version_;
  }
  [[nodiscard]] bool fits(const std::string& key, std::size_t bytes) const {
    const auto it = values_.find(key);
    const std::size_t held = it == values_.end() ? 0 : key.size() + it->second.size();
    return stored_bytes_ - held + key.size() + bytes <= options_.max_stored_bytes;
  }

  // Whether a request's fields are what its verb takes: a hello only first (served by serve()), an
  // integer of 8 bytes for get and add, a wait's timeout in decimal and its keys each ended by '\0'.
  static bool well_formed(const tcp::Request& r) {
    switch (r.verb) {
      case tcp::Verb::hello: return false;
      case tcp::Verb::get:
      case tcp::Verb::add: return r.value.size() == sizeof(std::int64_t);
      case tcp::Verb::wait: return tcp::parse_count(r.key) && (r.value.empty() || r.value.back() == '\0');
      default: return true;
    }
  }
  // Whether the client on `fd` closed or shut its sending side, even with bytes still unread (a
  // waiting request of a client gone ends).
  static bool gone(int fd) noexcept {
    pollfd p{fd, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }
  // Waits (the lock held) until `ready`, the deadline, the server's stop, or the client's leaving
  // (nullopt); true when ready or stopping.
  template <class Ready>
  std::optional<bool> wait_until(std::unique_lock<std::mutex>& lock, int fd, tcp::SteadyClock::time_point deadline, Ready ready) {
    for (;;) {
      const auto slice = std::min(deadline, tcp::SteadyClock::now() + std::chrono::milliseconds(50));
      if (changed_.wait_until(lock, slice, [&] { return stopping_ || ready(); })) return true;
      if (tcp::SteadyClock::now() >= deadline) return false;
      if (gone(fd)) return std::nullopt;
    }
  }

  // The reply to one request; nullopt for a malformed one (its connection is closed).
  std::optional<tcp::Reply> answer(int fd, Client& client, const tcp::Request& r) {
    std::unique_lock lock(mutex_);
    const auto refused = [](const std::string& why) { return tcp::Reply{tcp::Status::refused, to_bytes(why)}; };
    if (!well_formed(r)) return std::nullopt;
    if (guard_)
      if (std::string why = guard_(client, r, values_); !why.empty()) return refused(why);
    switch (r.verb) {
      case tcp::Verb::claim:
        client.claimed = r.key;
        return tcp::Reply{};
      case tcp::Verb::set:
        if (!fits(r.key, r.value.size())) return refused("the store is full (" + std::to_string(options_.max_stored_bytes) + " bytes)");
        store(r.key, r.value);
        changed_.notify_all();
        return tcp::Reply{};
      case tcp::Verb::add: {
        const auto it = values_.find(r.key);
        if (it != values_.end() && it->second.size() != sizeof(std::int64_t)) return refused("'" + r.key + "' holds no integer");
        std::int64_t sum = 0;
        if (__builtin_add_overflow(it == values_.end() ? 0 : tcp::value_int(it->second), tcp::value_int(r.value), &sum))
          return refused("'" + r.key + "' would overflow");
        if (!fits(r.key, sizeof sum)) return refused("the store is full (" + std::to_string(options_.max_stored_bytes) + " bytes)");
        store(r.key, tcp::int_value(sum));
        changed_.notify_all();
        return tcp::Reply{tcp::Status::ok, tcp::int_value(sum)};
      }
      case tcp::Verb::try_get: {
        const auto it = values_.find(r.key);
        if (it == values_.end()) return tcp::Reply{tcp::Status::missing, {}};
        return tcp::Reply{tcp::Status::ok, it->second};
      }
      case tcp::Verb::get: {
        const auto deadline = tcp::SteadyClock::now() + wait_of(tcp::value_int(r.value));
        const std::optional<bool> ready = wait_until(lock, fd, deadline, [&] { return values_.count(r.key) > 0; });
        if (!ready) return std::nullopt;
        if (!*ready) return tcp::Reply{tcp::Status::timed_out, {}};
        if (stopping_) return tcp::Reply{tcp::Status::stopping, {}};
        return tcp::Reply{tcp::Status::ok, values_[r.key]};
      }
      case tcp::Verb::wait: {
        const auto deadline = tcp::SteadyClock::now() + wait_of(*tcp::parse_count(r.key));
        const auto all_set = [&] {
          for (std::size_t b = 0; b < r.value.size();) {
            const std::string key(r.value.data() + b);
            if (values_.count(key) == 0) return false;
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
  // A client's wait in ms, at least 0 and at most a day.
  static std::chrono::milliseconds wait_of(std::int64_t ms) noexcept {
    return std::chrono::milliseconds(std::clamp<std::int64_t>(ms, 0, 24 * 3600 * 1000));
  }

  StoreOptions options_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::uint64_t version_ = 0;
  Values values_;
  std::size_t stored_bytes_ = 0;
  Guard guard_;
  std::list<Connection> connections_;  // stable addresses: each thread holds its own
  tcp::Socket listener_;
  int port_ = 0;
  bool stopping_ = false;
  std::thread acceptor_;
};

}  // namespace cocod::comm
