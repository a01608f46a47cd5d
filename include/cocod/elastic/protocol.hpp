#pragma once
// The messages of an elastic run between the coordinator (elastic::Coordinator) and its members
// (elastic::Member), written once for both sides: the keys in the rendezvous store, who may write
// each, and the text of each value with its bounds. Every parse returns nullopt for a value it
// does not accept (never throws): the coordinator reads what any client may have written.
//
// Keys, under a prefix (default "elastic/"):
//   next_id                       the last worker id handed out (a joining worker adds 1)
//   worker/<id>                   claimed by the worker's connections (with its secret)
//   worker/<id>/beat|min_workers  the worker's heartbeat count, its wish for the first epoch
//   worker/<id>/finished|leaving  it ended the run / leaves it (why)
//   worker/<id>/closed|expelled   the coordinator's: its connection closed / why it was expelled
//   epoch, epoch/<e>/members      the coordinator's: the latest epoch; its members in rank order
//   epoch/<e>/start               the coordinator's: where epoch e continues from
//   epoch/<e>/held/<id>           a continuing member's rounds and their positions
//   epoch/<e>/switch              a member asks for the next epoch at a round end
//   epoch/<e>/gloo/...            the epoch's comm::Gloo context (its members' addresses, errors)
//   finished, waiting, log        the coordinator's
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#define COCOD_INTERNAL_INCLUDE
#include "cocod/rendezvous/detail/messages.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::elastic::protocol {

/// The most workers a coordinator keeps track of at once (a join beyond it is refused).
inline constexpr std::size_t kMaxWorkers = 4096;
/// The most worker ids a run hands out (joins beyond it are refused: start a new run).
inline constexpr std::int64_t kMaxIds = 1 << 16;
/// The most rounds a member reports holding, and the longest position it gives one.
inline constexpr std::size_t kMaxHeld = 256;
inline constexpr std::size_t kMaxPosition = 64;
/// A worker's secret (what proves a connection speaks for it): this many bytes.
inline constexpr std::size_t kSecretBytes = 32;

/// The fields of worker/ID/...
enum class WorkerField { beat, min_workers, finished, leaving, closed, expelled };
inline constexpr std::pair<WorkerField, std::string_view> kWorkerFields[] = {
    {WorkerField::beat, "beat"},         {WorkerField::min_workers, "min_workers"}, {WorkerField::finished, "finished"},
    {WorkerField::leaving, "leaving"},   {WorkerField::closed, "closed"},           {WorkerField::expelled, "expelled"}};
[[nodiscard]] constexpr std::string_view name(WorkerField f) noexcept {
  for (const auto& [field, text] : kWorkerFields)
    if (field == f) return text;
  return {};
}
/// Whether a worker writes this field of its own (the others are the coordinator's).
[[nodiscard]] constexpr bool written_by_worker(WorkerField f) noexcept {
  return f == WorkerField::beat || f == WorkerField::min_workers || f == WorkerField::finished || f == WorkerField::leaving;
}

/// The keys of one run.
struct Keys {
  std::string prefix = "elastic/";
  [[nodiscard]] std::string next_id() const { return prefix + "next_id"; }
  [[nodiscard]] std::string epoch() const { return prefix + "epoch"; }
  [[nodiscard]] std::string finished() const { return prefix + "finished"; }
  [[nodiscard]] std::string waiting() const { return prefix + "waiting"; }
  [[nodiscard]] std::string log() const { return prefix + "log"; }
  [[nodiscard]] std::string worker(std::int64_t id) const { return prefix + "worker/" + std::to_string(id); }
  [[nodiscard]] std::string worker(std::int64_t id, WorkerField f) const { return worker(id) + "/" + std::string(name(f)); }
  [[nodiscard]] std::string epoch(std::int64_t e) const { return prefix + "epoch/" + std::to_string(e); }
  [[nodiscard]] std::string members(std::int64_t e) const { return epoch(e) + "/members"; }
  [[nodiscard]] std::string start(std::int64_t e) const { return epoch(e) + "/start"; }
  [[nodiscard]] std::string held(std::int64_t e, std::int64_t id) const { return epoch(e) + "/held/" + std::to_string(id); }
  [[nodiscard]] std::string switch_at(std::int64_t e) const { return epoch(e) + "/switch"; }
  /// The prefix of epoch e's comm::Gloo keys (GlooOptions::prefix).
  [[nodiscard]] std::string gloo(std::int64_t e) const { return epoch(e) + "/gloo"; }
};

/// What a key names, read from its text (for the coordinator's guard): `kind` none when the key
/// is not one of the run's.
struct KeyName {
  enum class Kind { none, next_id, worker, worker_field, epoch_held, epoch_switch, epoch_gloo, coordinators } kind = Kind::none;
  std::int64_t worker = 0, epoch = 0;
  WorkerField field = WorkerField::beat;
};
[[nodiscard]] inline KeyName parse_key(const Keys& keys, std::string_view key) {
  using Kind = KeyName::Kind;
  KeyName out;
  if (key.substr(0, keys.prefix.size()) != keys.prefix) return out;
  key.remove_prefix(keys.prefix.size());
  const auto next_part = [&](std::string_view& rest) {
    const auto slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    return part;
  };
  const bool nested = key.find('/') != std::string_view::npos;
  const std::string_view head = next_part(key);
  if (!nested) {
    out.kind = head == "next_id" ? Kind::next_id : Kind::coordinators;  // epoch, finished, waiting, log, or another
    return out;
  }
  const auto id = rendezvous::tcp::parse_count(next_part(key));
  if (!id || *id == 0) {
    out.kind = Kind::coordinators;
    return out;
  }
  if (head == "worker") {
    out.worker = *id;
    if (key.empty() && nested) {
      out.kind = Kind::worker;
      return out;
    }
    for (const auto& [field, text] : kWorkerFields)
      if (key == text) {
        out.kind = Kind::worker_field;
        out.field = field;
        return out;
      }
    out.kind = Kind::coordinators;
    return out;
  }
  out.kind = Kind::coordinators;
  if (head != "epoch") return out;
  out.epoch = *id;
  const std::string_view what = next_part(key);
  if (what == "held") {
    if (const auto w = rendezvous::tcp::parse_count(key); w && *w > 0) out.kind = Kind::epoch_held, out.worker = *w;
  } else if (what == "switch" && key.empty()) {
    out.kind = Kind::epoch_switch;
  } else if (what == "gloo") {
    out.kind = Kind::epoch_gloo;
  }
  return out;
}

/// epoch/E/members: the worker ids in rank order, "3,1,4".
[[nodiscard]] inline std::string members_text(const std::vector<std::int64_t>& ids) {
  std::string out;
  for (std::int64_t id : ids) {  // (appended piece by piece: GCC 12 warns of a concatenation's copy)
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out;
}
[[nodiscard]] inline std::optional<std::vector<std::int64_t>> parse_members(std::string_view text) {
  std::vector<std::int64_t> ids;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto id = rendezvous::tcp::parse_count(text.substr(0, comma));
    if (!id || *id == 0 || ids.size() >= kMaxWorkers) return std::nullopt;
    ids.push_back(*id);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return std::nullopt;
  }
  if (ids.empty()) return std::nullopt;
  return ids;
}

/// One round a continuing member holds, and its position in the run ("step24": the members'
/// positions of a round must agree).
struct Held {
  std::int64_t round = 0;
  std::string position;
  friend bool operator==(const Held&, const Held&) = default;
};
/// epoch/E/held/ID: "v" then " <round>:<position>" per round held (positions of letters and
/// digits).
[[nodiscard]] inline std::string held_text(const std::vector<Held>& held) {
  std::string out = "v";
  for (const Held& h : held) {
    out += ' ';
    out += std::to_string(h.round);
    out += ':';
    out += h.position;
  }
  return out;
}
[[nodiscard]] inline std::optional<std::vector<Held>> parse_held(std::string_view text) {
  if (text.substr(0, 1) != "v") return std::nullopt;
  text.remove_prefix(1);
  std::vector<Held> out;
  while (!text.empty()) {
    if (text.front() != ' ' || out.size() >= kMaxHeld) return std::nullopt;
    text.remove_prefix(1);
    const std::string_view item = text.substr(0, text.find(' '));
    text.remove_prefix(item.size());
    const auto colon = item.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const auto round = rendezvous::tcp::parse_count(item.substr(0, colon));
    const std::string_view position = item.substr(colon + 1);
    if (!round || position.empty() || position.size() > kMaxPosition) return std::nullopt;
    for (char c : position)
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return std::nullopt;
    out.push_back({*round, std::string(position)});
  }
  return out;
}

/// epoch/E/start: "fresh", "round R donor D", or "error: WHY".
struct Start {
  std::optional<std::int64_t> round;  ///< nullopt: fresh
  std::int64_t donor = 0;
  std::string error{};  ///< non-empty: the epoch cannot start (why)
};
[[nodiscard]] inline std::string start_text(const Start& s) {
  if (!s.error.empty()) return "error: " + s.error;
  if (!s.round) return "fresh";
  return "round " + std::to_string(*s.round) + " donor " + std::to_string(s.donor);
}
[[nodiscard]] inline std::optional<Start> parse_start(std::string_view text) {
  Start s;
  if (text == "fresh") return s;
  if (text.substr(0, 7) == "error: ") {
    s.error = std::string(text.substr(7));
    return s.error.empty() ? std::nullopt : std::optional<Start>(s);
  }
  if (text.substr(0, 6) != "round ") return std::nullopt;
  text.remove_prefix(6);
  const auto space = text.find(" donor ");
  if (space == std::string_view::npos) return std::nullopt;
  const auto round = rendezvous::tcp::parse_count(text.substr(0, space));
  const auto donor = rendezvous::tcp::parse_count(text.substr(space + 7));
  if (!round || !donor || *donor == 0) return std::nullopt;
  s.round = *round;
  s.donor = *donor;
  return s;
}

/// epoch: the number, as decimal text.
[[nodiscard]] inline std::optional<std::int64_t> parse_epoch(std::string_view text) { return rendezvous::tcp::parse_count(text); }

}  // namespace cocod::elastic::protocol
