#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/rendezvous/detail/messages.hpp is internal: include <cocod/rendezvous/tcp_store.hpp>"
#endif
// The messages between the rendezvous store's clients and its server. A request is an operation
// byte, a key and a value; the reply a status byte and a value; lengths are 32-bit, in the
// machine's byte order (clients and server are built from the same headers; the store serves
// one cluster of like machines). A connection opens with a hello (the protocol's name, and the
// run's token); the server reads every field against bounds and closes a connection that sends
// anything else.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cocod/rendezvous/detail/socket.hpp"

namespace cocod::rendezvous::tcp {

/// What a client asks the server.
enum class Verb : std::uint8_t {
  set = 'S',      ///< key := value
  get = 'G',      ///< the value of key, waiting for it up to the timeout in value (8 bytes, ms)
  try_get = 'T',  ///< the value of key if it is set, at once
  add = 'A',      ///< key += the integer in value (8 bytes); replies the new value
  wait = 'W',     ///< waits until every key (value: keys separated by '\0') is set, up to key's ms
  claim = 'C',    ///< this connection belongs to key (value: a secret): when it closes, the server sets "<key>/closed"
  hello = 'H',    ///< the first request of a connection: key the protocol's name (kProtocol), value the token
};
[[nodiscard]] constexpr bool is_verb(std::uint8_t v) noexcept {
  return v == 'S' || v == 'G' || v == 'T' || v == 'A' || v == 'W' || v == 'C' || v == 'H';
}
/// The protocol a hello names: a server refuses a client of another one.
inline constexpr const char* kProtocol = "cocod-store/2";

/// ok; missing (try_get of an unset key); timed_out (get, wait); stopping (the server stops);
/// refused (the request was not allowed: the reply's value says why; the connection stays open).
enum class Status : std::uint8_t { ok = 0, missing = 1, timed_out = 2, stopping = 3, refused = 4 };

struct Request {
  Verb verb = Verb::get;
  std::string key;
  std::vector<char> value;
};
struct Reply {
  Status status = Status::ok;
  std::vector<char> value;
};

[[nodiscard]] inline bool send_bytes(int fd, const std::string& s) {
  const auto n = static_cast<std::uint32_t>(s.size());
  return send_all(fd, &n, sizeof n) && send_all(fd, s.data(), s.size());
}
[[nodiscard]] inline bool send_bytes(int fd, const std::vector<char>& v) {
  const auto n = static_cast<std::uint32_t>(v.size());
  return send_all(fd, &n, sizeof n) && send_all(fd, v.data(), v.size());
}
/// At most `limit` bytes, read as they arrive (a length prefix alone allocates nothing): false when
/// the connection closed, or the length is over the limit.
template <class Bytes>
[[nodiscard]] bool recv_bytes(int fd, Bytes& out, std::size_t limit) {
  std::uint32_t n = 0;
  if (!recv_all(fd, &n, sizeof n) || n > limit) return false;
  out.clear();
  constexpr std::size_t chunk = 64 << 10;
  for (std::size_t done = 0; done < n;) {
    const std::size_t part = std::min<std::size_t>(chunk, n - done);
    out.resize(done + part);
    if (!recv_all(fd, out.data() + done, part)) return false;
    done += part;
  }
  return true;
}

/// The bounds a server reads requests against.
struct RequestLimits {
  std::size_t key_bytes = 1024;
  std::size_t value_bytes = 1 << 20;
};

[[nodiscard]] inline bool send_request(int fd, const Request& r) {
  const auto verb = static_cast<std::uint8_t>(r.verb);
  return send_all(fd, &verb, 1) && send_bytes(fd, r.key) && send_bytes(fd, r.value);
}
/// False when the connection closed or the request is malformed (an unknown verb, a field over its bound).
[[nodiscard]] inline bool recv_request(int fd, Request& r, const RequestLimits& limits) {
  std::uint8_t verb = 0;
  if (!recv_all(fd, &verb, 1) || !is_verb(verb)) return false;
  r.verb = static_cast<Verb>(verb);
  return recv_bytes(fd, r.key, limits.key_bytes) && recv_bytes(fd, r.value, limits.value_bytes);
}
[[nodiscard]] inline bool send_reply(int fd, const Reply& r) {
  const auto status = static_cast<std::uint8_t>(r.status);
  return send_all(fd, &status, 1) && send_bytes(fd, r.value);
}
[[nodiscard]] inline bool recv_reply(int fd, Reply& r) {
  std::uint8_t status = 0;
  if (!recv_all(fd, &status, 1)) return false;
  r.status = static_cast<Status>(status);
  return recv_bytes(fd, r.value, std::size_t{64} << 20);
}

/// An integer as the 8 bytes of a value, and back (0 unless the value holds 8 bytes).
[[nodiscard]] inline std::vector<char> int_value(std::int64_t v) {
  std::vector<char> out(sizeof v);
  std::memcpy(out.data(), &v, sizeof v);
  return out;
}
[[nodiscard]] inline std::int64_t value_int(const std::vector<char>& v) noexcept {
  std::int64_t out = 0;
  if (v.size() == sizeof out) std::memcpy(&out, v.data(), sizeof out);
  return out;
}
/// A decimal integer that is the whole of `s` (no sign, no space), if it is one and fits.
[[nodiscard]] inline std::optional<std::int64_t> parse_count(std::string_view s) noexcept {
  std::int64_t v = 0;
  if (s.empty() || s.size() > 18) return std::nullopt;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (error != std::errc{} || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

/// Whether a request after hello has the fields its verb takes: an integer of 8 bytes for get
/// and add, a wait's timeout in decimal and its keys each ended by '\0' (a hello only first).
[[nodiscard]] inline bool well_formed(const Request& r) {
  switch (r.verb) {
    case Verb::hello: return false;
    case Verb::get:
    case Verb::add: return r.value.size() == sizeof(std::int64_t);
    case Verb::wait: return parse_count(r.key) && (r.value.empty() || r.value.back() == '\0');
    default: return true;
  }
}
/// Whether a connection's first request is a hello of this protocol with `token`, compared in
/// constant time (its duration tells nothing of how much of it matched).
[[nodiscard]] inline bool hello_accepted(const Request& r, const std::string& token) noexcept {
  if (r.verb != Verb::hello || r.key != kProtocol) return false;
  unsigned char diff = r.value.size() == token.size() ? 0 : 1;
  for (std::size_t i = 0; i < r.value.size(); ++i)
    diff |= static_cast<unsigned char>(r.value[i] ^ (token.empty() ? 0 : token[i % token.size()]));
  return diff == 0;
}
/// A client's wait in ms as the server takes it: at least 0, at most a day.
[[nodiscard]] inline std::chrono::milliseconds wait_of(std::int64_t ms) noexcept {
  return std::chrono::milliseconds(std::clamp<std::int64_t>(ms, 0, 24 * 3600 * 1000));
}

}  // namespace cocod::rendezvous::tcp
