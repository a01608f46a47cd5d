#pragma once
// A worker's side of an elastic run's membership (the coordinator's is elastic::Coordinator):
// it joins, beats its heart on a connection of its own (which the coordinator watches: when the
// process ends, the connection closes and the coordinator knows at once), learns each
// membership epoch it belongs to and the round that epoch continues from, and is told when it
// was expelled. It needs no Gloo (elastic::train, which trains on each epoch, does).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cocod/rendezvous/tcp_store.hpp"
#include "cocod/elastic/protocol.hpp"
#include "cocod/errors.hpp"

namespace cocod::elastic {

using Clock = std::chrono::steady_clock;

/// This worker was expelled from the run (its heart stopped beating for the coordinator's
/// heartbeat timeout, e.g. a stopped process); the message says why. It should end.
class Expelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The epoch a worker was settling was replaced by a newer one before it started (a member was
/// lost meanwhile): the worker goes on to the next.
class Superseded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The run ended before this worker was admitted to it.
class RunFinished : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One membership epoch as a worker sees it.
struct Epoch {
  std::int64_t number = 0;
  std::vector<std::int64_t> members;  ///< worker ids in rank order
  int rank = -1;                      ///< this worker's rank in it
  /// Where it continues from: nullopt for a fresh start; else the round, and the member (by id)
  /// that gives its state to those that do not hold it.
  std::optional<std::int64_t> round;
  std::int64_t donor = 0;
  [[nodiscard]] int size() const noexcept { return static_cast<int>(members.size()); }
};

struct MemberOptions {
  std::string coordinator{};  ///< "host:port"
  std::chrono::milliseconds heartbeat_interval = std::chrono::milliseconds(200);
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(60);
  std::string prefix = "elastic/";
  /// The least number of workers this worker wants in the run's first epoch (the coordinator
  /// takes the largest such wish of the workers alive then, and its own --min-workers; later
  /// epochs wait for the coordinator's alone); 0: no wish.
  int min_workers = 0;
  /// The run's shared secret (CoordinatorOptions::token); empty when the coordinator has none.
  std::string token{};
};

class Member {
 public:
  /// Joins the run: takes an id and starts the heartbeat. Throws CommunicationError when the
  /// coordinator cannot be reached within connect_timeout.
  explicit Member(MemberOptions options)
      : options_(std::move(options)),
        keys_{options_.prefix},
        store_(std::make_shared<rendezvous::TcpStore>(options_.coordinator, options_.connect_timeout, options_.token)),
        heart_(std::make_unique<rendezvous::TcpStore>(options_.coordinator, options_.connect_timeout, options_.token)) {
    id_ = store_->add(keys_.next_id(), 1);
    const std::string secret = new_secret();  // (both connections speak for this worker)
    heart_->claim(keys_.worker(id_), secret);
    store_->claim(keys_.worker(id_), secret);
    if (options_.min_workers > 0) store_->add(keys_.worker(id_, protocol::WorkerField::min_workers), options_.min_workers);
    heart_->add(keys_.worker(id_, protocol::WorkerField::beat), 1);
    beat_ = std::thread([this] { beat(); });
  }
  Member(const Member&) = delete;
  Member& operator=(const Member&) = delete;
  ~Member() {
    {
      std::lock_guard lock(mutex_);
      leaving_ = true;
    }
    cv_.notify_all();
    if (beat_.joinable()) beat_.join();
  }

  [[nodiscard]] std::int64_t id() const noexcept { return id_; }
  [[nodiscard]] rendezvous::TcpStore& store() noexcept { return *store_; }
  [[nodiscard]] std::shared_ptr<rendezvous::TcpStore> shared_store() const noexcept { return store_; }
  /// The keys of epoch `e`'s comm::Gloo context in this run's store (GlooOptions::prefix).
  [[nodiscard]] std::string gloo_prefix(std::int64_t e) const { return keys_.gloo(e); }

  /// The first epoch after `after` that this worker belongs to, once the coordinator formed it
  /// and chose where it starts. Throws Expelled if this worker was expelled, CommunicationError
  /// if the coordinator is gone or nothing came within `timeout`.
  Epoch next_epoch(std::int64_t after, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (std::int64_t e = after + 1;; ++e) {
      std::string members;
      try {
        members = wait_for(keys_.members(e), deadline, e);
      } catch (const Superseded&) {  // a past epoch the coordinator forgot: the next
        continue;
      }
      Epoch epoch;
      epoch.number = e;
      epoch.members = parsed(protocol::parse_members(members), keys_.members(e), members);
      for (std::size_t i = 0; i < epoch.members.size(); ++i)
        if (epoch.members[i] == id_) epoch.rank = static_cast<int>(i);
      if (epoch.rank < 0) continue;  // formed without this worker (it was waiting): the next
      return epoch;
    }
  }

  /// A continuing member tells the coordinator which rounds it holds a state of, and their
  /// digests; then waits for the coordinator's choice of round (set in `epoch`). Throws
  /// DistributedError when the members' states of that round differ.
  void settle_start(Epoch& epoch, const std::vector<std::pair<std::int64_t, std::string>>& held,
                    std::chrono::milliseconds timeout) {
    std::vector<protocol::Held> report;  // (the coordinator reads those of the members that trained before)
    for (const auto& [round, position] : held) report.push_back({round, position});
    const std::string text = protocol::held_text(report);
    store_->set(keys_.held(epoch.number, id_), std::vector<char>(text.begin(), text.end()));
    const std::string value = wait_for(keys_.start(epoch.number), Clock::now() + timeout, epoch.number);
    const protocol::Start start = parsed(protocol::parse_start(value), keys_.start(epoch.number), value);
    if (!start.error.empty()) throw DistributedError("cocod::elastic: epoch " + std::to_string(epoch.number) + ": " + start.error);
    epoch.round = start.round;
    epoch.donor = start.donor;
  }

  /// While this worker trains in `epoch`, the heartbeat calls `abort` once if the coordinator
  /// formed a newer epoch (a member was expelled: the collective in flight may wait for it).
  void watch(std::int64_t epoch, std::function<void()> abort) {
    std::lock_guard lock(mutex_);
    watched_ = epoch;
    abort_ = std::move(abort);
  }
  void unwatch() { watch(0, {}); }

  /// This worker's run ended (it holds the final model): the coordinator forms no more epochs.
  void finish() { store_->set(keys_.worker(id_, protocol::WorkerField::finished), {'1'}); }
  /// This worker leaves the run (at a round end, by script; or refused): the coordinator forms
  /// the next epoch without it and logs "it left " + `why`.
  void leave(const std::string& why = "at a round end") {
    const std::string text = why.empty() ? "at a round end" : why;
    store_->set(keys_.worker(id_, protocol::WorkerField::leaving), std::vector<char>(text.begin(), text.end()));
  }
  /// Whether the coordinator formed an epoch after `epoch` (this worker's group was replaced).
  [[nodiscard]] bool replaced(std::int64_t epoch) {
    return newest(*store_) > epoch;
  }
  /// How many workers wait to be admitted, as the last heartbeat learned it (at most
  /// MemberOptions::heartbeat_interval old: asking at every round end would cost the training
  /// thread a round trip to the coordinator each time); 0 until a heartbeat has read it in the
  /// epoch this worker trains in (a count from before that epoch formed is stale).
  [[nodiscard]] std::int64_t waiting() {
    std::lock_guard lock(mutex_);
    return waiting_epoch_ >= watched_ ? waiting_ : 0;
  }
  /// Asks the coordinator to admit the waiting workers into the epoch after `epoch` (the members
  /// call it at an agreed round end, then call next_epoch()).
  void ask_switch(std::int64_t epoch) { store_->set(keys_.switch_at(epoch), {'1'}); }
  /// The coordinator's membership log so far.
  [[nodiscard]] std::string log() {
    auto v = store_->try_get(keys_.log());
    return v ? std::string(v->begin(), v->end()) : std::string();
  }
  /// Throws Expelled if the coordinator expelled this worker, CommunicationError if the
  /// heartbeat could not reach the coordinator.
  void check() {
    std::lock_guard lock(mutex_);
    if (!expelled_.empty()) throw Expelled("cocod::elastic: worker " + std::to_string(id_) + " was expelled: " + expelled_);
    if (!heart_error_.empty()) throw CommunicationError(heart_error_);
  }

 private:
  static std::int64_t value(const std::optional<std::vector<char>>& v) { return v ? rendezvous::tcp::value_int(*v) : 0; }
  static std::string new_secret() {
    std::random_device entropy;
    std::string secret(protocol::kSecretBytes, '\0');
    for (char& c : secret) c = "0123456789abcdef"[entropy() % 16];
    return secret;
  }
  // A value the coordinator wrote, read (a malformed one ends this worker with a clear error).
  template <class T>
  T parsed(std::optional<T> v, const std::string& k, const std::string& text) const {
    if (!v) throw CommunicationError("cocod::elastic: worker " + std::to_string(id_) + ": the coordinator's '" + k + "' is malformed ('" + text.substr(0, 80) + "')");
    return std::move(*v);
  }
  // The latest epoch the coordinator formed (0: none yet).
  std::int64_t newest(rendezvous::TcpStore& store) const {
    auto v = store.try_get(keys_.epoch());
    if (!v) return 0;
    const std::string text(v->begin(), v->end());
    return parsed(protocol::parse_epoch(text), keys_.epoch(), text);
  }

  // Waits for a key, checking between short waits whether this worker was expelled (and, with
  // `epoch`, whether a newer epoch replaced that one).
  std::string wait_for(const std::string& k, Clock::time_point deadline, std::int64_t epoch = 0) {
    for (;;) {
      check();
      if (auto v = store_->try_get(k)) return std::string(v->begin(), v->end());
      if (store_->try_get(keys_.finished()))
        throw RunFinished("cocod::elastic: worker " + std::to_string(id_) + ": the run finished without this worker");
      if (epoch > 0 && newest(*store_) > epoch)
        throw Superseded("cocod::elastic: epoch " + std::to_string(epoch) + " was replaced before it started");
      if (Clock::now() > deadline)
        throw CommunicationError("cocod::elastic: worker " + std::to_string(id_) + ": the coordinator did not set '" + k + "' in time");
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, std::chrono::milliseconds(5));
    }
  }

  void beat() {
    std::unique_lock lock(mutex_);
    while (!cv_.wait_for(lock, options_.heartbeat_interval, [&] { return leaving_; })) {
      lock.unlock();
      std::string expelled, error;
      std::int64_t latest = 0, waiting = 0;
      try {
        heart_->add(keys_.worker(id_, protocol::WorkerField::beat), 1);
        if (auto v = heart_->try_get(keys_.worker(id_, protocol::WorkerField::expelled))) expelled.assign(v->begin(), v->end());
        latest = newest(*heart_);
        waiting = value(heart_->try_get(keys_.waiting()));
      } catch (const std::exception& e) {
        error = std::string("cocod::elastic: the coordinator at ") + options_.coordinator + " is gone (" + e.what() + ")";
      }
      lock.lock();
      waiting_ = waiting;
      waiting_epoch_ = latest;  // (read before the count: the count is at least as new)
      if (watched_ > 0 && latest > watched_ && abort_) {
        abort_();  // (noexcept: closes the epoch's connections)
        abort_ = {};
      }
      if (!expelled.empty()) expelled_ = expelled;
      if (!error.empty()) heart_error_ = error;
      if (!error.empty() || !expelled.empty()) return;
    }
  }

  MemberOptions options_;
  protocol::Keys keys_;
  std::shared_ptr<rendezvous::TcpStore> store_;
  std::unique_ptr<rendezvous::TcpStore> heart_;  // its own connection: the coordinator watches it
  std::int64_t id_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool leaving_ = false;
  std::string expelled_, heart_error_;
  std::int64_t watched_ = 0, waiting_ = 0, waiting_epoch_ = 0;
  std::function<void()> abort_;
  std::thread beat_;
};

}  // namespace cocod::elastic
