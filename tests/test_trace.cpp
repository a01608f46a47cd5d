// trace::Timeline: every step, wait and collective of every worker, in order, written as a
// Chrome trace; with CoCoD-SGD the all-reduces overlap the steps, with Local-SGD they do not.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "support.hpp"

namespace {
using Model = cocod_test::LeastSquares<double>;
using cocod::trace::Kind;

std::size_t count(const cocod::trace::Lane& lane, Kind kind) {
  const auto e = lane.events();
  return static_cast<std::size_t>(std::count_if(e.begin(), e.end(), [&](const auto& x) { return x.kind == kind; }));
}

/// Steps that start while an all-reduce of the same worker is in flight.
std::size_t overlapped_steps(const cocod::trace::Lane& lane) {
  std::size_t n = 0;
  for (const auto& c : lane.events())
    if (c.kind == Kind::all_reduce)
      for (const auto& s : lane.events())
        if (s.kind == Kind::step && s.start > c.start && s.start < c.end) ++n;
  return n;
}

template <template <class...> class Algorithm>
cocod::trace::Timeline run(const char* name) {
  cocod::trace::Timeline timeline(name, 2);
  const cocod::comm::Link link{.latency = 0.002, .bandwidth = 1e12};  // 4 ms per all-reduce
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads inner) {
    cocod::comm::Throttled<cocod::comm::Threads> comm{inner, link};
    Model model(256, 16, 1 + static_cast<std::uint64_t>(comm.rank()));
    Algorithm<Model, decltype(comm)> opt{comm, {.learning_rate = 0.01, .period = 4, .batch_size = 8}};
    opt.trace(&timeline.lane(comm.rank()));
    opt.optimize(model, cocod::Steps{40});
  });
  return timeline;
}
}  // namespace

TEST_CASE("the timeline records each step, wait and all-reduce in order") {
  const auto timeline = run<cocod::Optimizer>("CoCoD-SGD");
  for (const auto& lane : timeline.lanes()) {
    CHECK(count(lane, Kind::step) == 40);
    CHECK(count(lane, Kind::all_reduce) == 11);  // one per round (10) and the final consensus
    CHECK(count(lane, Kind::wait) == 11);
    cocod::comm::Clock::time_point last{};
    std::size_t step = 0;
    for (const auto& e : lane.events()) {
      CHECK(e.end >= e.start);
      if (e.kind == Kind::step) {
        CHECK(e.start >= last);  // steps follow each other
        CHECK(e.index == step++);
        last = e.end;
      }
    }
  }
  // CoCoD-SGD: each round's all-reduce runs under the next k steps.
  CHECK(overlapped_steps(timeline.lanes()[0]) >= 30);
  // Local-SGD: the all-reduce blocks, no step runs under it.
  const auto local = run<cocod::LocalSGD>("Local-SGD");
  CHECK(count(local.lanes()[0], Kind::all_reduce) == 11);  // a round's, and finish()'s agreement that all finish
  CHECK(overlapped_steps(local.lanes()[0]) == 0);

  // The Chrome trace: metadata per process and track, one complete event per recorded event.
  std::ostringstream os;
  const cocod::trace::Timeline* both[] = {&timeline, &local};
  cocod::trace::write_chrome_trace(os, both);
  const std::string json = os.str();
  CHECK(json.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0) == 0);
  CHECK(json.substr(json.size() - 4) == "\n]}\n");
  std::size_t events = 0;
  for (std::size_t p = json.find("\"ph\":\"X\""); p != std::string::npos; p = json.find("\"ph\":\"X\"", p + 1)) ++events;
  std::size_t recorded = 0;
  for (const auto* t : both)
    for (const auto& lane : t->lanes()) recorded += lane.events().size();
  CHECK(events == recorded);
  CHECK(json.find(R"({"name":"process_name","ph":"M","pid":1,"args":{"name":"Local-SGD"}})") != std::string::npos);
  CHECK(json.find(R"("tid":3,"args":{"name":"worker 1 network"})") != std::string::npos);
}

TEST_CASE("trace errors name the rank or the file") {
  cocod::trace::Timeline t("x", 2);
  CHECK_THROWS_WITH((void)t.lane(2), "cocod::trace::Timeline: no lane for rank 2 (2 workers)");
  CHECK_THROWS_WITH(t.save("/nonexistent-dir/trace.json"),
                    "cocod::trace: cannot open '/nonexistent-dir/trace.json' for writing");
  CHECK_THROWS_WITH(cocod::trace::Timeline("y", 0), "cocod::trace::Timeline: workers must be >= 1");
}
