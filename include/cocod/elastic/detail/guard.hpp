#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/elastic/detail/guard.hpp is internal: include <cocod/elastic/coordinator.hpp>"
#endif
// Who may write what in an elastic run's store: reads are free; a worker claims its id with a
// secret (the first claim records it) and then writes only its own fields and its epochs' keys
// (held, switch, the Gloo context); joining adds exactly 1 to the next id, within the run's
// bounds; everything else is the coordinator's.
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cocod/rendezvous/store_server.hpp"
#include "cocod/elastic/protocol.hpp"

namespace cocod::elastic::detail {

struct Guard {
  explicit Guard(protocol::Keys k) : keys(std::move(k)) {}

  protocol::Keys keys;
  std::atomic<std::size_t> alive{0};  // the workers alive at the coordinator's last look

  /// Why the request is refused, or an empty string. The store calls it under its lock, one
  /// request at a time: the secrets need no lock of their own.
  std::string operator()(rendezvous::StoreServer::Client& client, const rendezvous::tcp::Request& r, const rendezvous::StoreServer::Values& values) {
    using Kind = protocol::KeyName::Kind;
    using rendezvous::tcp::Verb;
    if (r.verb == Verb::get || r.verb == Verb::try_get || r.verb == Verb::wait) return {};
    const protocol::KeyName k = protocol::parse_key(keys, r.key);
    const auto next_id = [&] {
      const auto it = values.find(keys.next_id());
      return it == values.end() ? std::int64_t{0} : rendezvous::tcp::value_int(it->second);
    };
    if (r.verb == Verb::claim) {
      if (k.kind != Kind::worker) return "only a worker's own key can be claimed";
      if (k.worker > next_id()) return "no such worker id was handed out";
      if (r.value.size() != protocol::kSecretBytes) return "a claim needs the worker's secret";
      auto [secret, first] = secrets_.try_emplace(k.worker, r.value);
      if (!first && secret->second != r.value) return "worker " + std::to_string(k.worker) + " was claimed by another";
      client.mark = k.worker;
      return {};
    }
    const auto not_its = [&] { return "'" + r.key + "' is not this client's to write"; };
    switch (k.kind) {
      case Kind::next_id:
        if (r.verb != Verb::add || rendezvous::tcp::value_int(r.value) != 1) return "a worker joins by adding 1";
        if (alive.load() >= protocol::kMaxWorkers) return "the run has " + std::to_string(protocol::kMaxWorkers) + " workers";
        if (next_id() >= protocol::kMaxIds)
          return "the run handed out its " + std::to_string(protocol::kMaxIds) + " worker ids (start a new run)";
        return {};
      case Kind::worker_field: return client.mark != k.worker || !protocol::written_by_worker(k.field) ? not_its() : std::string();
      case Kind::epoch_held: return client.mark != k.worker ? not_its() : std::string();
      case Kind::epoch_switch:
      case Kind::epoch_gloo: return client.mark == 0 ? "only a worker writes '" + r.key + "'" : std::string();
      default: return "'" + r.key + "' is the coordinator's";
    }
  }

 private:
  std::map<std::int64_t, std::vector<char>> secrets_;  // each claimed worker's secret
};

}  // namespace cocod::elastic::detail
