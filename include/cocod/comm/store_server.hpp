#pragma once
// The rendezvous store's server: keys and values in memory, served over TCP to comm::TcpStore
// clients (comm::Gloo's workers find each other through it). The coordinator program serves
// one; comm::GlooOptions::serve_store has rank 0 serve one in-process; tests start their own.
//
//     cocod::comm::StoreServer server{"", 29500};   // every interface, port 29500
//     ... server.port() ...                         // the port (useful with port 0)
//
// One thread per connection (a run has tens of workers, not thousands); stop() or the
// destructor closes every connection, so that a client waiting in get() learns it at once.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define COCOD_INTERNAL_INCLUDE
#include "cocod/comm/detail/tcp/messages.hpp"
#include "cocod/comm/detail/tcp/socket.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::comm {

class StoreServer {
 public:
  /// Listens on `bind_host`:`port` (empty host: every interface; port 0: one the system picks,
  /// see port()). Throws cocod::CommunicationError when it cannot listen.
  StoreServer(const std::string& bind_host, int port) {
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
  /// Sets `key` as a client's set() would (waking whoever waits for it).
  void assign(const std::string& key, std::vector<char> value) {
    {
      std::lock_guard lock(mutex_);
      values_[key] = std::move(value);
      ++version_;
    }
    changed_.notify_all();
  }
  /// Every key that begins with `prefix`, with its value.
  [[nodiscard]] std::map<std::string, std::vector<char>> with_prefix(const std::string& prefix) const {
    std::lock_guard lock(mutex_);
    std::map<std::string, std::vector<char>> out;
    for (auto it = values_.lower_bound(prefix); it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
      out.insert(*it);
    return out;
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

 private:
  struct Connection {
    tcp::Socket socket;
    std::thread thread;
    bool done = false;  // its thread is about to return (guarded by mutex_)
  };

  void accept_loop() {
    for (;;) {
      const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      std::lock_guard lock(mutex_);
      if (stopping_) {
        if (fd >= 0) ::close(fd);
        return;
      }
      if (fd < 0) continue;  // a connection reset before it was accepted, or EINTR
      reap();
      tcp::set_no_delay(fd);
      connections_.push_back(Connection{tcp::Socket(fd), {}, false});
      Connection& c = connections_.back();
      c.thread = std::thread([this, &c] { serve(c); });
    }
  }

  // One client's requests, answered in order, until it disconnects or the server stops. A
  // connection that claimed a key sets "<key>/closed" when it ends (its process is gone).
  void serve(Connection& c) {
    const int fd = c.socket.fd();
    tcp::Request request;
    std::string owner;
    while (tcp::recv_request(fd, request)) {
      if (request.verb == tcp::Verb::claim) owner = request.key;
      if (!tcp::send_reply(fd, answer(request))) break;
    }
    {
      std::lock_guard lock(mutex_);
      c.done = true;  // reaped by the next accept
      if (stopping_ || owner.empty()) return;
      values_[owner + "/closed"] = {'1'};
      ++version_;
    }
    changed_.notify_all();
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

  tcp::Reply answer(const tcp::Request& r) {
    std::unique_lock lock(mutex_);
    switch (r.verb) {
      case tcp::Verb::claim: return {};
      case tcp::Verb::set:
        values_[r.key] = r.value;
        ++version_;
        changed_.notify_all();
        return {};
      case tcp::Verb::add: {
        auto& v = values_[r.key];
        v = tcp::int_value(tcp::value_int(v) + tcp::value_int(r.value));
        ++version_;
        changed_.notify_all();
        return {tcp::Status::ok, v};
      }
      case tcp::Verb::try_get: {
        const auto it = values_.find(r.key);
        if (it == values_.end()) return {tcp::Status::missing, {}};
        return {tcp::Status::ok, it->second};
      }
      case tcp::Verb::get: {
        const auto deadline = tcp::SteadyClock::now() + std::chrono::milliseconds(tcp::value_int(r.value));
        if (!changed_.wait_until(lock, deadline, [&] { return stopping_ || values_.count(r.key) > 0; }))
          return {tcp::Status::timed_out, {}};
        if (stopping_) return {tcp::Status::refused, {}};
        return {tcp::Status::ok, values_[r.key]};
      }
      case tcp::Verb::wait: {
        const auto deadline = tcp::SteadyClock::now() + std::chrono::milliseconds(std::stoll(r.key));
        const auto all_set = [&] {
          for (std::size_t b = 0; b < r.value.size();) {
            const std::string key(r.value.data() + b);
            if (values_.count(key) == 0) return false;
            b += key.size() + 1;
          }
          return true;
        };
        if (!changed_.wait_until(lock, deadline, [&] { return stopping_ || all_set(); }))
          return {tcp::Status::timed_out, {}};
        return {stopping_ ? tcp::Status::refused : tcp::Status::ok, {}};
      }
    }
    return {tcp::Status::refused, {}};
  }

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::uint64_t version_ = 0;
  std::map<std::string, std::vector<char>> values_;
  std::list<Connection> connections_;  // stable addresses: each thread holds its own
  tcp::Socket listener_;
  int port_ = 0;
  bool stopping_ = false;
  std::thread acceptor_;
};

}  // namespace cocod::comm
