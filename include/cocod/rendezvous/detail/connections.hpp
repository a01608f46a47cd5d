#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/rendezvous/detail/connections.hpp is internal: include <cocod/rendezvous/store_server.hpp>"
#endif
// The connections of a store server: a thread that accepts them, and a thread per connection
// that serves it. Their number is bounded (more are closed as they arrive), the ones that ended
// are joined at the next accept (a coordinator that outlives many workers keeps no thread per
// past connection), and out of descriptors or memory the acceptor waits for connections to end
// rather than spin.
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "cocod/rendezvous/detail/socket.hpp"

namespace cocod::rendezvous::tcp {

class Connections {
 public:
  /// Serves one connection on its own thread; the socket is closed once it returns.
  using Serve = std::function<void(int fd)>;

  /// Accepts on `listener` from now on; a new connection's receives time out after
  /// `first_timeout` until `serve` changes it (set_receive_timeout).
  Connections(Socket listener, std::size_t max, std::chrono::milliseconds first_timeout, Serve serve)
      : listener_(std::move(listener)), max_(max), first_timeout_(first_timeout), serve_(std::move(serve)) {
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  Connections(const Connections&) = delete;
  Connections& operator=(const Connections&) = delete;
  ~Connections() { stop(); }

  /// Closes the listener and every connection and joins their threads. Idempotent.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      listener_.shutdown();
      for (Connection& c : connections_) c.socket.shutdown();
    }
    stopped_.notify_all();
    if (acceptor_.joinable()) acceptor_.join();
    for (Connection& c : connections_)
      if (c.thread.joinable()) c.thread.join();
  }
  /// The connections open now.
  [[nodiscard]] std::size_t open() const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const Connection& c : connections_) n += c.done ? 0 : 1;
    return n;
  }

 private:
  struct Connection {
    Socket socket;
    std::thread thread;
    bool done = false;  // its thread is about to return (guarded by mutex_)
  };

  void accept_loop() {
    for (;;) {
      const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      const int error = errno;
      if (fd < 0 && (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM)) {
        std::unique_lock lock(mutex_);
        reap();
        if (stopped_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stopping_; })) return;
        continue;
      }
      std::lock_guard lock(mutex_);
      if (stopping_) {
        if (fd >= 0) ::close(fd);
        return;
      }
      if (fd < 0) continue;  // a connection reset before it was accepted, or EINTR
      reap();
      if (connections_.size() >= max_) {  // full: this one is closed
        ::close(fd);
        continue;
      }
      set_no_delay(fd);
      set_receive_timeout(fd, first_timeout_);
      connections_.push_back(Connection{Socket(fd), {}, false});
      Connection& c = connections_.back();
      try {
        c.thread = std::thread([this, &c] { run(c); });
      } catch (const std::system_error&) {  // no thread to be had: this connection is closed
        connections_.pop_back();
      }
    }
  }
  void run(Connection& c) {
    serve_(c.socket.fd());
    std::lock_guard lock(mutex_);
    c.socket.close();  // (the client learns at once; stop() shuts only the open ones, under the same lock)
    c.done = true;     // joined by the next accept
  }
  // Joins and forgets the connections that ended (the lock held).
  void reap() {
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      it->thread.join();  // (it set done under the lock we hold and only returns after)
      it = connections_.erase(it);
    }
  }

  Socket listener_;
  std::size_t max_;
  std::chrono::milliseconds first_timeout_;
  Serve serve_;
  mutable std::mutex mutex_;
  std::condition_variable stopped_;
  bool stopping_ = false;
  std::list<Connection> connections_;  // stable addresses: each thread holds its own
  std::thread acceptor_;
};

}  // namespace cocod::rendezvous::tcp
