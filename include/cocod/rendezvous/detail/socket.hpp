#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/rendezvous/detail/socket.hpp is internal: include <cocod/rendezvous/tcp_store.hpp>"
#endif
// The few TCP calls the rendezvous store and its server make (POSIX sockets): an owned socket,
// "host:port" addresses, connecting with retries until a deadline, listening, and moving whole
// messages. Failures throw cocod::CommunicationError naming the address and the system's reason.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "cocod/errors.hpp"

namespace cocod::rendezvous::tcp {

using SteadyClock = std::chrono::steady_clock;

/// An owned socket (closed when destroyed).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) noexcept : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] bool open() const noexcept { return fd_ >= 0; }
  /// Ends both directions now: a thread blocked in recv() on it returns (the server's stop).
  void shutdown() noexcept {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }
  void close() noexcept {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  }

 private:
  int fd_ = -1;
};

/// A "host:port" address.
struct Address {
  std::string host;
  int port = 0;
  [[nodiscard]] std::string text() const { return host + ":" + std::to_string(port); }
};

/// Parses "host:port" (port 0-65535; "[::1]:29500" for IPv6). `what` names the setting in the
/// message of std::invalid_argument.
[[nodiscard]] inline Address parse_address(const std::string& s, const std::string& what) {
  const auto colon = s.rfind(':');
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument(what + " must be HOST:PORT, " + why + " (got '" + s + "')");
  };
  if (colon == std::string::npos || colon == 0) throw bad("with a host");
  Address a{s.substr(0, colon), 0};
  if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']') a.host = a.host.substr(1, a.host.size() - 2);
  const std::string port = s.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    throw bad("the port a number from 0 to 65535");
  a.port = std::stoi(port);
  if (a.port > 65535) throw bad("the port a number from 0 to 65535");
  return a;
}

[[nodiscard]] inline std::string system_reason(int error) { return std::strerror(error); }

inline void set_no_delay(int fd) noexcept {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}
/// A receive on `fd` fails after `t` without data (zero: it waits for good).
inline void set_receive_timeout(int fd, std::chrono::milliseconds t) noexcept {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}
/// Whether the peer on `fd` closed or shut its sending side, even with bytes still unread.
[[nodiscard]] inline bool peer_gone(int fd) noexcept {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/// Connects to `a`, retrying every 10-200 ms (the server may not listen yet) until `deadline`.
[[nodiscard]] inline Socket connect_to(const Address& a, SteadyClock::time_point deadline, const std::string& who) {
  auto pause = std::chrono::milliseconds(10);
  std::string reason = "no attempt";
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &found);
    if (rc != 0) {
      reason = std::string("cannot resolve the host: ") + ::gai_strerror(rc);
    } else {
      for (addrinfo* p = found; p; p = p->ai_next) {
        Socket s(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
        if (!s.open()) {
          reason = system_reason(errno);
          continue;
        }
        if (::connect(s.fd(), p->ai_addr, p->ai_addrlen) == 0) {
          ::freeaddrinfo(found);
          set_no_delay(s.fd());
          return s;
        }
        reason = system_reason(errno);
      }
      ::freeaddrinfo(found);
    }
    if (SteadyClock::now() + pause > deadline)
      throw CommunicationError(who + ": cannot connect to " + a.text() + ": " + reason);
    std::this_thread::sleep_for(pause);
    pause = std::min(2 * pause, std::chrono::milliseconds(200));
  }
}

/// A socket listening on `bind_host`:`port` (port 0: one the system picks; bind_host empty: every
/// interface). Returns it and the port it listens on.
[[nodiscard]] inline std::pair<Socket, int> listen_on(const std::string& bind_host, int port, const std::string& who) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(bind_host.empty() ? nullptr : bind_host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) throw CommunicationError(who + ": cannot resolve '" + bind_host + "': " + ::gai_strerror(rc));
  std::string reason = "no address";
  for (addrinfo* p = found; p; p = p->ai_next) {
    Socket s(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
    if (!s.open()) continue;
    int one = 1;
    ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.fd(), p->ai_addr, p->ai_addrlen) != 0 || ::listen(s.fd(), 128) != 0) {
      reason = system_reason(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&bound), &len);
    const int actual = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                                   : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    ::freeaddrinfo(found);
    return {std::move(s), actual};
  }
  ::freeaddrinfo(found);
  throw CommunicationError(who + ": cannot listen on " + (bind_host.empty() ? "*" : bind_host) + ":" +
                           std::to_string(port) + ": " + reason);
}

/// Sends all `n` bytes; false when the connection is gone.
[[nodiscard]] inline bool send_all(int fd, const void* data, std::size_t n) noexcept {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    p += sent;
    n -= static_cast<std::size_t>(sent);
  }
  return true;
}
/// Receives exactly `n` bytes; false when the connection closed or failed first.
[[nodiscard]] inline bool recv_all(int fd, void* data, std::size_t n) noexcept {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace cocod::rendezvous::tcp
