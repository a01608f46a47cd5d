// libFuzzer target: the elastic coordinator fed raw requests, as anyone who reaches its port can
// send them. Each input gets a coordinator of its own (loopback, a token) and one connection:
// the first byte says whether the connection first says a good hello (bit 0) and joins as a
// worker (bit 1: an id, claimed with a secret, a heartbeat); the rest is sent as it is, then the
// connection's sending side is shut. The coordinator must close that connection (never hang on
// it), and then still serve a well-behaved client and stop cleanly; the messages of the elastic
// protocol are parsed from the same bytes and must print back to what they parsed. A crash, a
// sanitizer report, a leak, a hang (over 5 s) or a broken check is a finding.
#include <sys/socket.h>
#include <sys/time.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <cocod/elastic/coordinator.hpp>
#include <cocod/elastic/protocol.hpp>

#include "fuzz_common.hpp"

namespace {
namespace tcp = cocod::rendezvous::tcp;
namespace protocol = cocod::elastic::protocol;
using cocod_fuzz::finding;

const std::string kToken = "fuzz-token";

tcp::Socket connect(int port) {
  tcp::Socket s = tcp::connect_to({"127.0.0.1", port}, tcp::SteadyClock::now() + std::chrono::seconds(2), "fuzz");
  timeval tv{2, 0};
  ::setsockopt(s.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return s;
}
bool ask(const tcp::Socket& s, tcp::Verb verb, const std::string& key, const std::vector<char>& value, tcp::Reply& reply) {
  return tcp::send_request(s.fd(), {verb, key, value}) && tcp::recv_reply(s.fd(), reply);
}
bool hello(const tcp::Socket& s) {
  tcp::Reply r;
  return ask(s, tcp::Verb::hello, tcp::kProtocol, {kToken.begin(), kToken.end()}, r) && r.status == tcp::Status::ok;
}

// The protocol's parsers on the bytes: what they accept prints back to itself.
void parsers(std::string_view text) {
  if (const auto held = protocol::parse_held(text)) {
    if (protocol::parse_held(protocol::held_text(*held)) != held) finding("parse_held does not round-trip");
  }
  if (const auto members = protocol::parse_members(text)) {
    if (protocol::parse_members(protocol::members_text(*members)) != members) finding("parse_members does not round-trip");
  }
  if (const auto start = protocol::parse_start(text)) {
    const auto back = protocol::parse_start(protocol::start_text(*start));
    if (!back || back->round != start->round || back->donor != start->donor || back->error != start->error)
      finding("parse_start does not round-trip");
  }
  (void)protocol::parse_key(protocol::Keys{}, text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  parsers(rest);
  cocod::elastic::Coordinator coordinator({.bind = "127.0.0.1", .port = 0, .min_workers = 1,
                                           .first_epoch_grace = std::chrono::milliseconds(0), .token = kToken});
  const int port = coordinator.port();
  {
    tcp::Socket s = connect(port);
    if (data[0] & 1) {
      if (!hello(s)) finding("a good hello was refused");
      if (data[0] & 2) {
        const protocol::Keys keys;
        tcp::Reply r;
        if (!ask(s, tcp::Verb::add, keys.next_id(), tcp::int_value(1), r) || r.status != tcp::Status::ok) finding("a join was refused");
        const std::int64_t id = tcp::value_int(r.value);
        const std::string secret(protocol::kSecretBytes, 's');
        if (!ask(s, tcp::Verb::claim, keys.worker(id), {secret.begin(), secret.end()}, r) || r.status != tcp::Status::ok)
          finding("a claim of a worker's own id was refused");
        if (!ask(s, tcp::Verb::add, keys.worker(id, protocol::WorkerField::beat), tcp::int_value(1), r) || r.status != tcp::Status::ok)
          finding("a heartbeat was refused");
      }
    }
    (void)tcp::send_all(s.fd(), rest.data(), rest.size());
    ::shutdown(s.fd(), SHUT_WR);
    char buffer[4096];
    ssize_t n = 0;
    while ((n = ::recv(s.fd(), buffer, sizeof buffer, 0)) > 0) {
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) finding("the coordinator kept a connection whose client had shut it for 2 s");
  }
  {
    tcp::Socket s = connect(port);
    tcp::Reply r;
    if (!hello(s) || !ask(s, tcp::Verb::try_get, "elastic/nothing", {}, r) || r.status != tcp::Status::missing)
      finding("the coordinator no longer serves a well-behaved client");
  }
  coordinator.stop();
  return 0;
}
