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
// Keys (under `prefix`, default "elastic/"): next_id; worker/<id>/beat, worker/<id>/closed,
// worker/<id>/expelled; epoch (the latest); epoch/<e>/members ("3,1,4": rank order),
// epoch/<e>/held/<id> (what a continuing member holds: "round:digest ..."), epoch/<e>/start
// ("fresh", "round R donor D", or "error: ..."), worker/<id>/finished and finished (the run
// ended: no more epochs), worker/<id>/leaving (why it leaves), epoch/<e>/switch (the members ended epoch e at
// a round end: the next one forms, with the waiting workers); waiting (how many wait); log.
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

#include "cocod/comm/store_server.hpp"
#include "cocod/errors.hpp"

namespace cocod::elastic {

struct CoordinatorOptions {
  std::string bind{};  ///< the interface to listen on (empty: every one)
  int port = 29500;    ///< 0: one the system picks (Coordinator::port())
  /// The run waits until this many workers are alive, at the start and after a loss.
  int min_workers = 1;
  /// A worker whose heart has not beaten for this long is expelled (a stopped or hung process;
  /// a process that ended is noticed at once, by its closed connection).
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(2);
  /// The first epoch forms once min_workers are alive and nobody joined for this long (so that
  /// workers started together begin together).
  std::chrono::milliseconds first_epoch_grace = std::chrono::milliseconds(500);
  std::string prefix = "elastic/";
  std::string log_path{};  ///< also append the membership log to this file (empty: only in the store)
};

class Coordinator {
  using Clock = std::chrono::steady_clock;

 public:
  explicit Coordinator(CoordinatorOptions options) : options_(std::move(options)), server_(options_.bind, options_.port) {
    if (options_.min_workers < 1) invalid_setting("cocod::elastic::CoordinatorOptions", "min_workers", "must be >= 1", options_.min_workers);
    if (options_.heartbeat_timeout.count() <= 0)
      invalid_setting("cocod::elastic::CoordinatorOptions", "heartbeat_timeout", "must be > 0 ms", options_.heartbeat_timeout.count());
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
    if (thread_.joinable()) thread_.join();
    server_.stop();
  }

 private:
  struct Worker {
    std::int64_t beats = -1;
    Clock::time_point last_beat{};
    bool gone = false;  // closed, or expelled
  };

  std::string key(const std::string& k) const { return options_.prefix + k; }
  std::string get(const std::map<std::string, std::vector<char>>& all, const std::string& k) const {
    const auto it = all.find(key(k));
    return it == all.end() ? std::string() : std::string(it->second.begin(), it->second.end());
  }
  void put(const std::string& k, const std::string& v) { server_.assign(key(k), std::vector<char>(v.begin(), v.end())); }

  void note(const std::string& line) {
    {
      std::lock_guard lock(mutex_);
      log_.push_back(line);
    }
    std::string text;
    for (const auto& l : log()) text += l + "\n";
    put("log", text);
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
  void step(const std::map<std::string, std::vector<char>>& all) {
    const auto now = Clock::now();
    const std::int64_t ids = value_int(all, key("next_id"));
    for (std::int64_t id = 1; id <= ids; ++id) {
      Worker& w = workers_[id];
      if (w.gone) continue;
      if (w.last_beat == Clock::time_point{}) w.last_beat = last_join_ = now;  // first seen: a timeout's grace
      const std::string base = "worker/" + std::to_string(id);
      const std::int64_t beats = value_int(all, key(base + "/beat"));
      if (beats != w.beats) w.beats = beats, w.last_beat = now;
      if (!get(all, base + "/finished").empty()) {
        w.gone = true;
        if (!finished_) {
          finished_ = true;
          put("finished", "1");
          note("epoch " + std::to_string(epoch_) + ": the run finished");
        }
        continue;
      }
      std::string why;
      if (const std::string left = get(all, base + "/leaving"); !left.empty()) why = "it left " + left;
      else if (!get(all, base + "/closed").empty()) why = "its connection closed (the process ended)";
      else if (now - w.last_beat > options_.heartbeat_timeout)
        why = "no heartbeat for " + std::to_string(options_.heartbeat_timeout.count()) + " ms";
      if (why.empty()) continue;
      w.gone = true;
      put(base + "/expelled", why);
      if (std::find(members_.begin(), members_.end(), id) != members_.end()) {
        lost_.push_back("worker " + std::to_string(id) + ": " + why);
        note("epoch " + std::to_string(epoch_) + ": lost worker " + std::to_string(id) + ": " + why);
      } else {
        note("worker " + std::to_string(id) + " left before it was admitted: " + why);
      }
    }
    const std::vector<std::int64_t> waiting = publish_waiting();
    std::vector<std::int64_t> survivors;
    for (std::int64_t id : members_)
      if (!workers_[id].gone) survivors.push_back(id);

    if (finished_) return;
    int min_workers = options_.min_workers;  // and the largest wish of a worker alive
    for (const auto& [id, w] : workers_)
      if (!w.gone) min_workers = std::max<int>(min_workers, static_cast<int>(value_int(all, key("worker/" + std::to_string(id) + "/min_workers"))));
    const bool lost = survivors.size() != members_.size();
    const bool switch_asked = epoch_ > 0 && !get(all, "epoch/" + std::to_string(epoch_) + "/switch").empty();
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

  void form(const std::vector<std::int64_t>& next, const std::vector<std::int64_t>& continuing, bool lost) {
    ++epoch_;
    waiting_noted_ = -1;
    std::string list, why;
    for (std::int64_t id : next) list += (list.empty() ? "" : ",") + std::to_string(id);
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
    put("epoch/" + e + "/members", list);
    (void)publish_waiting();  // (before the epoch: who reads the epoch then reads the count of its time)
    put("epoch", e);
  }

  // The live workers that are not members (their number is the store's "waiting").
  std::vector<std::int64_t> publish_waiting() {
    std::vector<std::int64_t> waiting;
    for (const auto& [id, w] : workers_)
      if (!w.gone && w.beats >= 0 && std::find(members_.begin(), members_.end(), id) == members_.end()) waiting.push_back(id);
    if (static_cast<std::int64_t>(waiting.size()) != published_waiting_) {
      published_waiting_ = waiting_count_ = static_cast<std::int64_t>(waiting.size());
      server_.assign(key("waiting"), comm::tcp::int_value(published_waiting_));
    }
    return waiting;
  }

  // The round the epoch continues from: the latest that every continuing member holds, their
  // digests of it agreeing; the lowest-ranked of them gives its state to the newcomers.
  void choose_start(const std::map<std::string, std::vector<char>>& all) {
    const std::string e = std::to_string(epoch_);
    if (continuing_.empty()) {
      finish_start(e, "fresh");
      return;
    }
    std::map<std::int64_t, std::set<std::string>> digests;  // round -> digests
    std::map<std::int64_t, int> holders;
    for (std::int64_t id : continuing_) {
      const std::string held = get(all, "epoch/" + e + "/held/" + std::to_string(id));
      if (held.empty()) return;  // not yet reported
      std::istringstream in(held.substr(1));  // (after the mark "v")
      std::string item;
      while (in >> item) {
        const auto colon = item.find(':');
        const std::int64_t round = std::stoll(item.substr(0, colon));
        ++holders[round];
        digests[round].insert(item.substr(colon + 1));
      }
    }
    for (auto it = holders.rbegin(); it != holders.rend(); ++it) {
      if (it->second != static_cast<int>(continuing_.size())) continue;
      if (digests[it->first].size() != 1) {
        finish_start(e, "error: the members' states of round " + std::to_string(it->first) + " differ (" +
                            std::to_string(digests[it->first].size()) + " digests)");
        return;
      }
      finish_start(e, "round " + std::to_string(it->first) + " donor " + std::to_string(continuing_.front()));
      return;
    }
    note("epoch " + e + ": the continuing members hold no round in common (lost before their first round end)");
    finish_start(e, "fresh");
  }
  void finish_start(const std::string& e, const std::string& start) {
    pending_start_ = false;
    started_.insert(members_.begin(), members_.end());
    put("epoch/" + e + "/start", start);
    note("epoch " + e + " starts: " + start);
  }

  static std::int64_t value_int(const std::map<std::string, std::vector<char>>& all, const std::string& k) {
    const auto it = all.find(k);
    return it == all.end() ? -1 : comm::tcp::value_int(it->second);
  }

  CoordinatorOptions options_;
  comm::StoreServer server_;
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
