// The rendezvous store and the elastic coordinator against clients that do not play by the rules:
// raw requests over a socket, as anyone who reaches the port can send them. A malformed request
// closes its own connection and nothing else; lengths, values and connections are bounded; a
// client without the run's token is disconnected; the membership keys are the coordinator's,
// and a worker writes only its own. (The fuzz target fuzz_coordinator feeds it random requests.)
#include <doctest/doctest.h>

#include <cocod/elastic/coordinator.hpp>
#include <cocod/elastic/protocol.hpp>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {
namespace tcp = cocod::rendezvous::tcp;
namespace protocol = cocod::elastic::protocol;
using cocod::comm::StoreOptions;
using cocod::comm::StoreServer;
using cocod::elastic::Coordinator;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A client that speaks the store's wire format by hand (and can break it).
class Raw {
 public:
  explicit Raw(int port) : socket_(tcp::connect_to({"127.0.0.1", port}, Clock::now() + 5s, "test")) {
    timeval tv{5, 0};
    ::setsockopt(socket_.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  bool bytes(const std::string& raw) { return tcp::send_all(socket_.fd(), raw.data(), raw.size()); }
  // One request; nullopt when the server closed the connection instead of answering.
  std::optional<tcp::Reply> ask(tcp::Verb verb, const std::string& key, const std::vector<char>& value = {}) {
    tcp::Reply reply;
    if (!tcp::send_request(socket_.fd(), {verb, key, value}) || !tcp::recv_reply(socket_.fd(), reply)) return std::nullopt;
    return reply;
  }
  std::optional<tcp::Reply> ask(tcp::Verb verb, const std::string& key, const std::string& value) {
    return ask(verb, key, std::vector<char>(value.begin(), value.end()));
  }
  bool hello(const std::string& token = {}) {
    const auto r = ask(tcp::Verb::hello, tcp::kProtocol, token);
    return r && r->status == tcp::Status::ok;
  }
  // Whether the server closed this connection within the receive timeout (what it sent first is skipped).
  bool closed() {
    char buffer[256];
    ssize_t n = 0;
    while ((n = ::recv(socket_.fd(), buffer, sizeof buffer, 0)) > 0) {
    }
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
  static std::string refusal(const std::optional<tcp::Reply>& r) {
    return r && r->status == tcp::Status::refused ? std::string(r->value.begin(), r->value.end()) : std::string();
  }

 private:
  tcp::Socket socket_;
};

std::string u32(std::uint32_t n) { return std::string(reinterpret_cast<const char*>(&n), sizeof n); }
// The bytes of a request, field by field (a length before each of key and value).
std::string request_bytes(char verb, const std::string& key, std::uint32_t value_length, const std::string& value = {}) {
  std::string out(1, verb);
  out += u32(static_cast<std::uint32_t>(key.size()));
  out += key;
  out += u32(value_length);
  out += value;
  return out;
}
std::vector<char> int_bytes(std::int64_t v) { return tcp::int_value(v); }

// The store still serves a well-behaved client.
bool serves(int port, const std::string& token = {}) {
  Raw ok(port);
  if (!ok.hello(token)) return false;
  const auto r = ok.ask(tcp::Verb::try_get, "nothing");
  return r && r->status == tcp::Status::missing;
}
}  // namespace

TEST_CASE("store: a malformed request closes its own connection only") {
  StoreServer server("127.0.0.1", 0);
  Raw keeper(server.port());  // a client in good standing throughout
  REQUIRE(keeper.hello());
  REQUIRE(keeper.ask(tcp::Verb::set, "kept", std::string("1"))->status == tcp::Status::ok);

  SUBCASE("an unknown verb") {
    Raw bad(server.port());
    REQUIRE(bad.hello());
    CHECK(bad.bytes(request_bytes('Z', "k", 0)));
    CHECK(bad.closed());
  }
  SUBCASE("a wait whose timeout is not a number (the coordinator aborted on it)") {
    Raw bad(server.port());
    REQUIRE(bad.hello());
    CHECK_FALSE(bad.ask(tcp::Verb::wait, "soon", std::string("kept\0", 5)));
    CHECK(bad.closed());
  }
  SUBCASE("a length prefix of 64 MiB: closed at once, nothing allocated") {
    std::vector<std::unique_ptr<Raw>> bad;
    for (int i = 0; i < 8; ++i) {
      bad.push_back(std::make_unique<Raw>(server.port()));
      REQUIRE(bad.back()->hello());
      CHECK(bad.back()->bytes(request_bytes('S', "key", 64u << 20)));
    }
    for (auto& b : bad) CHECK(b->closed());
  }
  SUBCASE("a key over the bound") {
    Raw bad(server.port());
    REQUIRE(bad.hello());
    CHECK_FALSE(bad.ask(tcp::Verb::set, std::string(2000, 'k'), std::string("v")));
  }
  SUBCASE("get with a value that is not 8 bytes; add of a non-integer") {
    Raw bad(server.port());
    REQUIRE(bad.hello());
    CHECK_FALSE(bad.ask(tcp::Verb::get, "kept", std::string("x")));
    Raw other(server.port());
    REQUIRE(other.hello());
    CHECK_FALSE(other.ask(tcp::Verb::add, "n", std::string("123")));
  }
  SUBCASE("a second hello") {
    Raw bad(server.port());
    REQUIRE(bad.hello());
    CHECK_FALSE(bad.hello());
  }
  const auto r = keeper.ask(tcp::Verb::try_get, "kept");
  REQUIRE(r);
  CHECK(r->status == tcp::Status::ok);
  CHECK(serves(server.port()));
}

TEST_CASE("store: adds that would overflow or hit a non-integer are refused, the connection kept") {
  StoreServer server("127.0.0.1", 0);
  Raw c(server.port());
  REQUIRE(c.hello());
  REQUIRE(c.ask(tcp::Verb::add, "n", int_bytes(INT64_MAX - 1))->status == tcp::Status::ok);
  CHECK(Raw::refusal(c.ask(tcp::Verb::add, "n", int_bytes(2))).find("overflow") != std::string::npos);
  REQUIRE(c.ask(tcp::Verb::set, "text", std::string("abc"))->status == tcp::Status::ok);
  CHECK(Raw::refusal(c.ask(tcp::Verb::add, "text", int_bytes(1))).find("no integer") != std::string::npos);
  CHECK(tcp::value_int(c.ask(tcp::Verb::try_get, "n")->value) == INT64_MAX - 1);
}

TEST_CASE("store: the values held have a quota; connections have a bound") {
  StoreServer server("127.0.0.1", 0, StoreOptions{.max_value_bytes = 1000, .max_stored_bytes = 3000, .max_connections = 4});
  {
    Raw c(server.port());
    REQUIRE(c.hello());
    for (const char* key : {"k0", "k1", "k2"}) REQUIRE(c.ask(tcp::Verb::set, key, std::string(990, 'x'))->status == tcp::Status::ok);
    CHECK(Raw::refusal(c.ask(tcp::Verb::set, "k3", std::string(990, 'x'))).find("full") != std::string::npos);
    CHECK(c.ask(tcp::Verb::set, "k0", std::string(10, 'x'))->status == tcp::Status::ok);  // a smaller value fits again
    CHECK(c.ask(tcp::Verb::set, "k3", std::string(990, 'x'))->status == tcp::Status::ok);
    CHECK(server.stored_bytes() <= 3000);
    CHECK(server.stored_bytes() == 3 * (2 + 990) + 2 + 10);
    CHECK(server.erase_prefix("k1") == 1);  // forgotten keys free their bytes
    CHECK(server.stored_bytes() == 2 * (2 + 990) + 2 + 10);
    CHECK(server.erase_prefix("k") == 3);
    CHECK(server.stored_bytes() == 0);
  }
  std::vector<std::unique_ptr<Raw>> open;
  for (int i = 0; i < 4; ++i) {
    open.push_back(std::make_unique<Raw>(server.port()));
    REQUIRE(open.back()->hello());
  }
  Raw fifth(server.port());
  CHECK_FALSE(fifth.hello());  // closed as it arrived
  open.pop_back();  // a place frees (once the server saw it close)
  bool served = false;
  for (const auto deadline = Clock::now() + 5s; !served && Clock::now() < deadline; std::this_thread::sleep_for(20ms))
    served = serves(server.port());
  CHECK(served);
}

TEST_CASE("store: a token is required of every client; a silent connection is closed") {
  StoreServer server("127.0.0.1", 0, StoreOptions{.token = "s3cret", .hello_timeout = 300ms});
  {
    Raw none(server.port());
    CHECK_FALSE(none.hello());
    CHECK(none.closed());
  }
  {
    Raw wrong(server.port());
    CHECK_FALSE(wrong.hello("s3creT"));
  }
  {
    Raw longer(server.port());
    CHECK_FALSE(longer.hello("s3cret!"));
  }
  {
    Raw skipped(server.port());  // a request before hello
    const auto r = skipped.ask(tcp::Verb::set, "k", std::string("v"));
    CHECK((!r || r->status != tcp::Status::ok));
  }
  {
    Raw silent(server.port());
    const auto start = Clock::now();
    CHECK(silent.closed());
    CHECK(Clock::now() - start < 3s);
  }
  CHECK(serves(server.port(), "s3cret"));
  std::vector<char> v;
  CHECK_FALSE(server.lookup("k", v));
}

TEST_CASE("store: a client that leaves while it waits frees its connection") {
  StoreServer server("127.0.0.1", 0);
  {
    Raw waiter(server.port());
    REQUIRE(waiter.hello());
    const std::vector<char> hour = int_bytes(3600000);
    CHECK(waiter.bytes(request_bytes('G', "missing", 8, std::string(hour.begin(), hour.end()))));
  }
  const auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline && server.connections() > 0) std::this_thread::sleep_for(20ms);
  CHECK(server.connections() == 0);
}

namespace {
// A worker of the coordinator spoken by hand: joins (an id), claims it with a secret, beats.
struct RawWorker {
  Raw c;
  protocol::Keys keys;
  std::int64_t id = 0;
  RawWorker(int port, const std::string& token) : c(port) {
    REQUIRE(c.hello(token));
    const auto r = c.ask(tcp::Verb::add, keys.next_id(), int_bytes(1));
    REQUIRE(r);
    id = tcp::value_int(r->value);
    REQUIRE(c.ask(tcp::Verb::claim, keys.worker(id), std::string(protocol::kSecretBytes, 'a' + static_cast<char>(id)))->status ==
            tcp::Status::ok);
    beat();
  }
  void beat() { REQUIRE(c.ask(tcp::Verb::add, keys.worker(id, protocol::WorkerField::beat), int_bytes(1))->status == tcp::Status::ok); }
};
bool await_log(const Coordinator& c, const std::string& text, std::chrono::milliseconds limit = 5s) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    for (const auto& line : c.log())
      if (line.find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}
}  // namespace

TEST_CASE("coordinator: only the run's workers are served, and each writes only its own keys") {
  Coordinator c({.port = 0, .min_workers = 2, .heartbeat_timeout = 10s, .first_epoch_grace = 50ms, .token = "tok"});
  {
    Raw outsider(c.port());  // without the token
    CHECK_FALSE(outsider.hello());
  }
  RawWorker w1(c.port(), "tok");
  RawWorker w2(c.port(), "tok");
  protocol::Keys keys;
  Raw insider(c.port());  // has the token, speaks for no worker
  REQUIRE(insider.hello("tok"));
  const auto refused = [](Raw& r, tcp::Verb verb, const std::string& key, const std::vector<char>& value) {
    return !Raw::refusal(r.ask(verb, key, value)).empty();
  };
  const std::vector<char> one{'1'};
  // what an outsider could do before: expel a worker, end the run, move the epoch, flood the ids
  CHECK(refused(insider, tcp::Verb::set, keys.worker(2, protocol::WorkerField::expelled), one));
  CHECK(refused(insider, tcp::Verb::set, keys.worker(1, protocol::WorkerField::finished), one));
  CHECK(refused(insider, tcp::Verb::set, keys.epoch(), one));
  CHECK(refused(insider, tcp::Verb::set, keys.finished(), one));
  CHECK(refused(insider, tcp::Verb::add, keys.next_id(), int_bytes(1000000000)));
  CHECK(refused(insider, tcp::Verb::set, "elsewhere", one));
  CHECK(refused(insider, tcp::Verb::set, keys.held(1, 1), one));
  CHECK(refused(insider, tcp::Verb::set, keys.switch_at(1), one));
  // claims: an id not handed out, another's id with the wrong secret, no secret
  CHECK(refused(insider, tcp::Verb::claim, keys.worker(99), std::vector<char>(protocol::kSecretBytes, 'x')));
  CHECK(refused(insider, tcp::Verb::claim, keys.worker(w1.id), std::vector<char>(protocol::kSecretBytes, 'x')));
  CHECK(refused(insider, tcp::Verb::claim, keys.worker(w1.id), {}));
  // a worker: its own keys yes, the other's and the coordinator's no
  CHECK(refused(w1.c, tcp::Verb::set, keys.worker(w2.id, protocol::WorkerField::finished), one));
  CHECK(refused(w1.c, tcp::Verb::set, keys.worker(w1.id, protocol::WorkerField::expelled), one));
  CHECK(refused(w1.c, tcp::Verb::set, keys.held(1, w2.id), one));
  CHECK_FALSE(refused(w1.c, tcp::Verb::set, keys.gloo(1) + "/rank_0", one));
  REQUIRE(await_log(c, "epoch 1: workers 1,2"));
  std::vector<char> v;
  CHECK_FALSE(c.log().empty());
  for (const auto& line : c.log()) CHECK(line.find("finished") == std::string::npos);
}

TEST_CASE("coordinator: a member's malformed report expels that member; the run goes on") {
  Coordinator c({.port = 0, .min_workers = 1, .heartbeat_timeout = 10s, .first_epoch_grace = 1s});
  protocol::Keys keys;
  auto w1 = std::make_unique<RawWorker>(c.port(), "");
  auto w2 = std::make_unique<RawWorker>(c.port(), "");
  auto w3 = std::make_unique<RawWorker>(c.port(), "");
  REQUIRE(await_log(c, "epoch 1 starts: fresh"));
  w3.reset();  // its process ends: epoch 2 of workers 1 and 2, which both trained
  REQUIRE(await_log(c, "epoch 2: workers 1,2"));
  CHECK(w1->c.ask(tcp::Verb::set, keys.held(2, w1->id), std::string("v 3:step24 4:step32"))->status == tcp::Status::ok);
  CHECK(w2->c.ask(tcp::Verb::set, keys.held(2, w2->id), std::string("v 3:step24 x:"))->status == tcp::Status::ok);
  CHECK(await_log(c, "lost worker 2: its report of the rounds it holds is malformed"));
  REQUIRE(await_log(c, "epoch 3: workers 1"));
  CHECK(w1->c.ask(tcp::Verb::set, keys.held(3, w1->id), std::string("v 3:step24 4:step32"))->status == tcp::Status::ok);
  CHECK(await_log(c, "epoch 3 starts: round 4 donor 1"));
}

TEST_CASE("protocol: every value parses back to what was written, and junk to nothing") {
  const std::vector<protocol::Held> held{{3, "step24"}, {4, "step32"}};
  CHECK(protocol::parse_held(protocol::held_text(held)) == held);
  CHECK(protocol::parse_held("v")->empty());
  for (const char* junk : {"", "x", "v ", "v 3", "v 3:", "v :a", "v -1:a", "v 3:a b", "v 3:a  4:b", "v 99999999999999999999:a", "v 3:a/b"})
    CHECK_MESSAGE(!protocol::parse_held(junk), junk);
  CHECK(protocol::parse_members("3,1,4") == std::vector<std::int64_t>{3, 1, 4});
  for (const char* junk : {"", ",", "1,", ",1", "1,,2", "a", "0", "1, 2", "-1"}) CHECK_MESSAGE(!protocol::parse_members(junk), junk);
  const protocol::Start from{.round = 12, .donor = 3, .error = {}};
  const auto back = protocol::parse_start(protocol::start_text(from));
  REQUIRE(back);
  CHECK(back->round == 12);
  CHECK(back->donor == 3);
  CHECK_FALSE(protocol::parse_start("fresh")->round);
  CHECK(protocol::parse_start("error: no")->error == "no");
  for (const char* junk : {"", "round", "round x donor 1", "round 1 donor", "round 1 donor 0", "error: ", "Fresh"})
    CHECK_MESSAGE(!protocol::parse_start(junk), junk);
  const protocol::Keys keys;
  using Kind = protocol::KeyName::Kind;
  CHECK(protocol::parse_key(keys, keys.worker(7)).kind == Kind::worker);
  CHECK(protocol::parse_key(keys, keys.worker(7, protocol::WorkerField::leaving)).kind == Kind::worker_field);
  CHECK(protocol::parse_key(keys, keys.held(2, 7)).worker == 7);
  CHECK(protocol::parse_key(keys, keys.gloo(2) + "/x").kind == Kind::epoch_gloo);
  CHECK(protocol::parse_key(keys, keys.members(2)).kind == Kind::coordinators);
  CHECK(protocol::parse_key(keys, "elastic/worker/x/beat").kind == Kind::coordinators);
  CHECK(protocol::parse_key(keys, "other/worker/1").kind == Kind::none);
}
