#pragma once
// The coordinator of an elastic run: the rendezvous store its workers' comm::Gloo contexts meet
// in, and the keeper of who belongs to the run. Workers (elastic::Member) join, beat their
// heart, and are grouped into membership epochs; the coordinator notices a lost worker (its
// connection closed: at once; its heart stopped: after heartbeat_timeout), forms the next epoch
// of the others, admits waiting workers when the members ask for it at a round end, chooses the
// round the new epoch continues from (the latest round every continuing member holds, their
// digests of it agreeing) and the donor of its state, and logs every change. The program
// cocod-coordinator runs one; tests start their own.
//
// The keys and messages are elastic/protocol.hpp's. The coordinator trusts no client: with a
// token (CoordinatorOptions::token) only the run's workers are served; a worker may write only
// its own keys, which its connections prove by a secret it chose when it claimed its id; every
// value is parsed defensively, and a malformed one costs its writer its place, never the run.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cocod/rendezvous/store_server.hpp"
#include "cocod/elastic/protocol.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/elastic/detail/coordinator_options.hpp"
#include "cocod/elastic/detail/guard.hpp"
#include "cocod/elastic/detail/start.hpp"
#undef COCOD_INTERNAL_INCLUDE
#include "cocod/errors.hpp"

namespace cocod::elastic {

class Coordinator {
  using Clock = std::chrono::steady_clock;

 public:
  explicit Coordinator(CoordinatorOptions options)
      : options_(detail::checked(std::move(options))), keys_{options_.prefix}, server_(options_.bind, options_.port, detail::store_options(options_)) {
    server_.set_guard([this](rendezvous::StoreServer::Client& c, const rendezvous::tcp::Request& r, const rendezvous::StoreServer::Values& v) {
      return guard_(c, r, v);
    });
    thread_ = std::thread([this] { loop(); });
  }
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;
  ~Coordinator() { stop(); }

  [[nodiscard]] int port() const noexcept { return server_.port(); }
  /// How many workers wait to be admitted (as of the last look at the store).
  [[nodiscard]] std::int64_t waiting() const noexcept { return waiting_count_.load(); }
  /// The membership log so far, one line per change.
  [[nodiscard]] std::vector<std::string> log() const {
    std::lock_guard lock(mutex_);
    return log_;
  }
  /// Stops serving: every worker's next call to the store fails (it ends with a clear error).
  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    server_.stop();  // (first: it wakes the loop's wait for a change)
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Worker {
    std::int64_t beats = -1;
    Clock::time_point last_beat{};
    bool gone = false;  // closed, or expelled
  };

  using Values = rendezvous::StoreServer::Values;
  using Field = protocol::WorkerField;

  static std::string text(const Values& all, const std::string& k) {
    const auto it = all.find(k);
    return it == all.end() ? std::string() : std::string(it->second.begin(), it->second.end());
  }
  void put(const std::string& k, const std::string& v) { server_.assign(k, std::vector<char>(v.begin(), v.end())); }

  void note(const std::string& line) {
    std::string text;  // (the store keeps the last kLogLines lines)
    {
      std::lock_guard lock(mutex_);
      log_.push_back(line);
      for (std::size_t i = log_.size() > kLogLines ? log_.size() - kLogLines : 0; i < log_.size(); ++i) text += log_[i] + "\n";
    }
    put(keys_.log(), text);
    if (!options_.log_path.empty()) {
      std::ofstream f(options_.log_path, std::ios::app);
      f << line << "\n";
    }
  }

  void loop() {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
      }
      server_.wait_for_change(seen, std::chrono::milliseconds(20));
      seen = server_.version();
      step(server_.with_prefix(options_.prefix));
    }
  }

  // One look at the store: who is alive, whether the epoch must change, what it continues from.
  void step(const Values& all) {
    const auto now = Clock::now();
    for (const auto& [k, value] : all) {  // the workers that joined (each beats at once)
      const protocol::KeyName name = protocol::parse_key(keys_, k);
      if (name.kind != protocol::KeyName::Kind::worker_field || name.field != Field::beat) continue;
      Worker& w = workers_[name.worker];
      if (w.gone) continue;
      if (w.last_beat == Clock::time_point{}) w.last_beat = last_join_ = now;  // first seen: a timeout's grace
      if (const std::int64_t beats = rendezvous::tcp::value_int(value); beats != w.beats) w.beats = beats, w.last_beat = now;
    }
    std::size_t alive = 0;
    for (auto& [id, w] : workers_) {
      if (w.gone) continue;
      if (!text(all, keys_.worker(id, Field::finished)).empty()) {
        w.gone = true;
        if (!finished_ && is_member(id)) {
          finished_ = true;
          put(keys_.finished(), "1");
          note("epoch " + std::to_string(epoch_) + ": the run finished");
        }
        continue;
      }
      std::string why;
      if (const std::string left = text(all, keys_.worker(id, Field::leaving)); !left.empty()) why = "it left " + left.substr(0, 200);
      else if (!text(all, keys_.worker(id, Field::closed)).empty()) why = "its connection closed (the process ended)";
      else if (now - w.last_beat > options_.heartbeat_timeout)
        why = "no heartbeat for " + std::to_string(options_.heartbeat_timeout.count()) + " ms";
      if (why.empty()) {
        ++alive;
        continue;
      }
      expel(id, why);
    }
    guard_.alive = alive;
    const std::vector<std::int64_t> waiting = publish_waiting();
    std::vector<std::int64_t> survivors;
    for (std::int64_t id : members_)
      if (!workers_[id].gone) survivors.push_back(id);

    if (finished_) return;
    int min_workers = options_.min_workers;  // and, for the first epoch, the largest wish of a worker alive
    for (const auto& [id, w] : workers_)
      if (!w.gone && epoch_ == 0)
        min_workers = static_cast<int>(std::clamp<std::int64_t>(value_int(all, keys_.worker(id, Field::min_workers)), min_workers,
                                                                static_cast<std::int64_t>(protocol::kMaxWorkers)));
    const bool lost = survivors.size() != members_.size();
    const bool switch_asked = epoch_ > 0 && !text(all, keys_.switch_at(epoch_)).empty();
    if (epoch_ == 0 || lost || switch_asked) {
      std::vector<std::int64_t> next = survivors;
      next.insert(next.end(), waiting.begin(), waiting.end());
      const bool settled = epoch_ > 0 || now - last_join_ >= options_.first_epoch_grace;
      const bool enough = static_cast<int>(next.size()) >= min_workers;
      if (enough && settled) form(next, survivors, lost);
      else if (!enough && waiting_noted_ != static_cast<std::int64_t>(next.size())) {
        waiting_noted_ = static_cast<std::int64_t>(next.size());
        note("waiting: " + std::to_string(next.size()) + " of --min-workers " + std::to_string(min_workers) + " workers alive");
      }
    }
    if (pending_start_) choose_start(all);
  }
  [[nodiscard]] bool is_member(std::int64_t id) const { return std::find(members_.begin(), members_.end(), id) != members_.end(); }
  void expel(std::int64_t id, const std::string& why) {
    workers_[id].gone = true;
    put(keys_.worker(id, Field::expelled), why);
    if (is_member(id)) {
      lost_.push_back("worker " + std::to_string(id) + ": " + why);
      note("epoch " + std::to_string(epoch_) + ": lost worker " + std::to_string(id) + ": " + why);
    } else {
      note("worker " + std::to_string(id) + " left before it was admitted: " + why);
    }
  }
  void form(const std::vector<std::int64_t>& next, const std::vector<std::int64_t>& continuing, bool lost) {
    ++epoch_;
    waiting_noted_ = -1;
    const std::string list = protocol::members_text(next);
    std::string why;
    for (const auto& l : lost_) why += (why.empty() ? "" : "; ") + l;
    const std::string e = std::to_string(epoch_);
    std::string line = "epoch " + e + ": workers " + list;
    if (!why.empty()) line += " (lost " + why + ")";
    else if (lost) line += " (a member was lost)";
    else if (epoch_ > 1) {
      std::string joiners;
      for (std::int64_t id : next)
        if (std::find(continuing.begin(), continuing.end(), id) == continuing.end())
          joiners += (joiners.empty() ? "" : ",") + std::to_string(id);
      line += joiners.empty() ? " (at the members' request)" : " (admitted " + joiners + " at the members' request)";
    }
    lost_.clear();
    members_ = next;
    continuing_.clear();  // the members that trained before (those of a superseded epoch did not)
    for (std::int64_t id : continuing)
      if (started_.count(id)) continuing_.push_back(id);
    pending_start_ = true;
    note(line);
    put(keys_.members(epoch_), list);
    (void)publish_waiting();  // (before the epoch: who reads the epoch then reads the count of its time)
    put(keys_.epoch(), e);
    // The keys of the epoch before the last are read by nobody any more (a worker still in it
    // finds it replaced): forgotten, so that a long run stays within the store's quota.
    if (epoch_ > 2) server_.erase_prefix(keys_.epoch(epoch_ - 2) + "/");
  }

  // The live workers that are not members (their number is the store's "waiting").
  std::vector<std::int64_t> publish_waiting() {
    std::vector<std::int64_t> waiting;
    for (const auto& [id, w] : workers_)
      if (!w.gone && w.beats >= 0 && std::find(members_.begin(), members_.end(), id) == members_.end()) waiting.push_back(id);
    if (static_cast<std::int64_t>(waiting.size()) != published_waiting_) {
      published_waiting_ = waiting_count_ = static_cast<std::int64_t>(waiting.size());
      server_.assign(keys_.waiting(), rendezvous::tcp::int_value(published_waiting_));
    }
    return waiting;
  }

  // Where the epoch continues from (detail::choose_start), once every continuing member
  // reported; a member whose report cannot be read is expelled (the next epoch forms without it).
  void choose_start(const Values& all) {
    std::vector<std::string> reports;
    for (std::int64_t id : continuing_) reports.push_back(text(all, keys_.held(epoch_, id)));
    const detail::StartChoice choice = detail::choose_start(continuing_, reports);
    if (choice.malformed) expel(*choice.malformed, "its report of the rounds it holds is malformed");
    if (!choice.start) return;
    if (choice.none_in_common)
      note("epoch " + std::to_string(epoch_) + ": the continuing members hold no round in common (lost before their first round end)");
    finish_start(*choice.start);
  }
  void finish_start(const protocol::Start& start) {
    pending_start_ = false;
    started_.insert(members_.begin(), members_.end());
    const std::string text = protocol::start_text(start);
    put(keys_.start(epoch_), text);
    note("epoch " + std::to_string(epoch_) + " starts: " + text);
  }

  static std::int64_t value_int(const std::map<std::string, std::vector<char>>& all, const std::string& k) {
    const auto it = all.find(k);
    return it == all.end() ? -1 : rendezvous::tcp::value_int(it->second);
  }

  static constexpr std::size_t kLogLines = 1000;
  CoordinatorOptions options_;
  protocol::Keys keys_;
  rendezvous::StoreServer server_;
  detail::Guard guard_{keys_};
  mutable std::mutex mutex_;
  std::vector<std::string> log_;
  bool stopping_ = false;
  std::atomic<std::int64_t> waiting_count_{0};
  // the loop's own
  std::map<std::int64_t, Worker> workers_;
  std::vector<std::int64_t> members_, continuing_;
  std::set<std::int64_t> started_;  // the workers that began an epoch (hold its states)
  bool finished_ = false;
  std::vector<std::string> lost_;
  std::int64_t epoch_ = 0, published_waiting_ = -1;
  Clock::time_point last_join_{};
  bool pending_start_ = false;
  std::int64_t waiting_noted_ = -1;  // the number of workers the last "waiting" line counted
  std::thread thread_;
};

}  // namespace cocod::elastic
