#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/tcp/messages.hpp is internal: include <cocod/comm/tcp_store.hpp>"
#endif
// The messages between the rendezvous store's clients and its server. A request is an operation
// byte, a key and a value; the reply a status byte and a value; lengths are 32-bit, in the
// machine's byte order (clients and server are built from the same headers; the store serves
// one cluster of like machines).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cocod/comm/detail/tcp/socket.hpp"

namespace cocod::comm::tcp {

/// What a client asks the server.
enum class Verb : std::uint8_t {
  set = 'S',      ///< key := value
  get = 'G',      ///< the value of key, waiting for it up to the timeout in value (8 bytes, ms)
  try_get = 'T',  ///< the value of key if it is set, at once
  add = 'A',      ///< key += the integer in value (8 bytes); replies the new value
  wait = 'W',     ///< waits until every key (value: keys separated by '\0') is set, up to key's ms
  claim = 'C',    ///< this connection belongs to key: when it closes, the server sets "<key>/closed"
};

enum class Status : std::uint8_t { ok = 0, missing = 1, timed_out = 2, refused = 3 };

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
/// At most 64 MiB per key or value: a bad peer cannot make the server allocate without bound.
template <class Bytes>
[[nodiscard]] bool recv_bytes(int fd, Bytes& out) {
  std::uint32_t n = 0;
  if (!recv_all(fd, &n, sizeof n) || n > (64u << 20)) return false;
  out.resize(n);
  return recv_all(fd, out.data(), n);
}

[[nodiscard]] inline bool send_request(int fd, const Request& r) {
  const auto verb = static_cast<std::uint8_t>(r.verb);
  return send_all(fd, &verb, 1) && send_bytes(fd, r.key) && send_bytes(fd, r.value);
}
[[nodiscard]] inline bool recv_request(int fd, Request& r) {
  std::uint8_t verb = 0;
  if (!recv_all(fd, &verb, 1)) return false;
  r.verb = static_cast<Verb>(verb);
  return recv_bytes(fd, r.key) && recv_bytes(fd, r.value);
}
[[nodiscard]] inline bool send_reply(int fd, const Reply& r) {
  const auto status = static_cast<std::uint8_t>(r.status);
  return send_all(fd, &status, 1) && send_bytes(fd, r.value);
}
[[nodiscard]] inline bool recv_reply(int fd, Reply& r) {
  std::uint8_t status = 0;
  if (!recv_all(fd, &status, 1)) return false;
  r.status = static_cast<Status>(status);
  return recv_bytes(fd, r.value);
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

}  // namespace cocod::comm::tcp
