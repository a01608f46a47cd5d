#pragma once
// A client of the rendezvous store (rendezvous::StoreServer, or the coordinator program): how
// comm::Gloo's workers exchange their addresses, where a failing worker leaves its error for its
// peers, and how an elastic worker talks to its coordinator. Needs no Gloo itself.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cocod/errors.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/rendezvous/detail/messages.hpp"
#include "cocod/rendezvous/detail/socket.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::rendezvous {

/// One connection to the store at "host:port", which presents the run's `token` (empty: the
/// store has none; see StoreOptions::token). Thread-safe (requests are serialized). Every
/// failure throws cocod::CommunicationError naming the store: it cannot be reached within
/// `connect_timeout`, it refused the token, it closed the connection (it stopped), a wait timed
/// out, or it refused a request (the message says why).
class TcpStore {
 public:
  /// How long get(key) and wait(keys) wait without a timeout of their own.
  static constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::seconds(30);

  TcpStore(const std::string& address, std::chrono::milliseconds connect_timeout = std::chrono::seconds(30),
           const std::string& token = {})
      : address_(tcp::parse_address(address, "cocod::rendezvous::TcpStore: the store's address")),
        socket_(tcp::connect_to(address_, tcp::SteadyClock::now() + connect_timeout, who())) {
    const std::string protocol = tcp::kProtocol;
    tcp::Reply reply;
    if (!tcp::send_request(socket_.fd(), {tcp::Verb::hello, protocol, {token.begin(), token.end()}}) ||
        !tcp::recv_reply(socket_.fd(), reply) || reply.status != tcp::Status::ok) {
      socket_.close();
      throw CommunicationError(who() + ": the store refused this client (" +
                               (token.empty() ? std::string("no token given: set the run's token, e.g. COCOD_TOKEN")
                                              : std::string("the token is not the run's")) +
                               "; or the store is of another cocod version)");
    }
  }

  /// "host:port".
  [[nodiscard]] std::string address() const { return address_.text(); }

  void set(const std::string& key, const std::vector<char>& data) { call({tcp::Verb::set, key, data}, {}); }
  /// Waits for the key up to the default timeout (30 s).
  std::vector<char> get(const std::string& key) { return get(key, kDefaultTimeout); }
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) {
    tcp::Reply r = call({tcp::Verb::get, key, tcp::int_value(timeout.count())}, timeout);
    if (r.status == tcp::Status::timed_out)
      throw CommunicationError(who() + ": key '" + key + "' was not set within " + std::to_string(timeout.count()) + " ms");
    return std::move(r.value);
  }
  /// The value of `key` if it is set, at once.
  std::optional<std::vector<char>> try_get(const std::string& key) {
    tcp::Reply r = call({tcp::Verb::try_get, key, {}}, {});
    if (r.status != tcp::Status::ok) return std::nullopt;
    return std::move(r.value);
  }
  /// key += delta (a missing key counts 0), atomically; returns the new value.
  std::int64_t add(const std::string& key, std::int64_t delta) {
    return tcp::value_int(call({tcp::Verb::add, key, tcp::int_value(delta)}, {}).value);
  }
  /// This connection belongs to `key`: when it closes (this process ends), the server sets
  /// "<key>/closed", so that a coordinator learns of a lost worker at once. `secret` proves to
  /// an owner's guard that the claimer is who claimed the key first.
  void claim(const std::string& key, const std::string& secret = {}) { call({tcp::Verb::claim, key, {secret.begin(), secret.end()}}, {}); }
  void wait(const std::vector<std::string>& keys) { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
    if (!wait_for(keys, timeout))
      throw CommunicationError(who() + ": " + std::to_string(keys.size()) + " keys were not all set within " +
                               std::to_string(timeout.count()) + " ms (are all the workers started?)");
  }
  /// Whether every key was set within `timeout` (false when it passed first).
  [[nodiscard]] bool wait_for(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
    std::vector<char> list;
    for (const std::string& k : keys) {
      list.insert(list.end(), k.begin(), k.end());
      list.push_back('\0');
    }
    return call({tcp::Verb::wait, std::to_string(timeout.count()), list}, timeout).status != tcp::Status::timed_out;
  }

 private:
  [[nodiscard]] std::string who() const { return "cocod::rendezvous::TcpStore(" + address_.text() + ")"; }

  // One request and its reply. The reply may take `waits` (a get or wait) plus 10 s: a store
  // that does not answer within that (stopped, or its machine gone) fails the call.
  tcp::Reply call(const tcp::Request& request, std::chrono::milliseconds waits) {
    std::lock_guard lock(mutex_);
    if (!socket_.open()) throw CommunicationError(lost_);  // every later call says why, as the first did
    const auto limit = waits + std::chrono::seconds(10);
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(limit.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((limit.count() % 1000) * 1000);
    ::setsockopt(socket_.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    tcp::Reply reply;
    if (!tcp::send_request(socket_.fd(), request) || !tcp::recv_reply(socket_.fd(), reply)) {
      socket_.close();
      lost_ = who() + ": the store closed the connection or did not answer within " + std::to_string(limit.count() / 1000) +
              " s (the coordinator stopped?)";
      throw CommunicationError(lost_);
    }
    if (reply.status == tcp::Status::stopping) throw CommunicationError(who() + ": the store is stopping");
    if (reply.status == tcp::Status::refused)
      throw CommunicationError(who() + ": the store refused '" + request.key + "': " + std::string(reply.value.begin(), reply.value.end()));
    return reply;
  }

  tcp::Address address_;
  std::mutex mutex_;
  tcp::Socket socket_;
  std::string lost_;  // why the connection is gone
};

}  // namespace cocod::rendezvous

namespace cocod::comm {  // (the name of earlier versions, beside comm::Gloo)
using rendezvous::TcpStore;
}  // namespace cocod::comm
