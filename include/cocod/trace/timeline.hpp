#pragma once
// A timeline of a run: per worker, each local step (compute), each wait for a collective, and
// each all-reduce from post to completion, written as a Chrome trace (JSON) that opens in
// chrome://tracing or https://ui.perfetto.dev. It shows where communication overlaps compute.
//
//   cocod::trace::Timeline timeline("CoCoD-SGD", workers);
//   trainer.trace(&timeline.lane(rank));       // on each worker, before optimize()/begin()
//   ...
//   timeline.save("run.json");                 // after the run
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "cocod/comm/communicator.hpp"

namespace cocod::trace {

/// What an event of the timeline is.
enum class Kind : std::uint8_t {
  step,        ///< a local step: gradient, update, and any wait inside it
  wait,        ///< blocked on a collective (nested in a step or at the round's end)
  all_reduce,  ///< a collective from post to completion (on the worker's network track)
};

struct Event {
  Kind kind;
  std::size_t index;  ///< the global step during which it started
  comm::Clock::time_point start, end;
};

/// One worker's events. Recording appends to a vector: reserve() beforehand to keep the run
/// free of allocations (the trainer reserves for the run's known length).
class Lane {
 public:
  void record(Kind kind, std::size_t index, comm::Clock::time_point start, comm::Clock::time_point end) {
    events_.push_back(Event{kind, index, start, end});
  }
  void reserve(std::size_t events) { events_.reserve(events); }
  void clear() noexcept { events_.clear(); }
  [[nodiscard]] std::span<const Event> events() const noexcept { return events_; }

 private:
  std::vector<Event> events_;
};

/// The lanes of one run, one per worker. Each worker writes only its own lane, so in-process
/// workers need no locking; under MPI each process holds a Timeline and fills lane(rank).
class Timeline {
 public:
  Timeline(std::string name, int workers) : name_(std::move(name)), lanes_(static_cast<std::size_t>(workers)) {
    if (workers < 1) throw std::invalid_argument("cocod::trace::Timeline: workers must be >= 1");
  }
  [[nodiscard]] Lane& lane(int rank) {
    if (rank < 0 || static_cast<std::size_t>(rank) >= lanes_.size())
      throw std::out_of_range("cocod::trace::Timeline: no lane for rank " + std::to_string(rank) + " (" +
                              std::to_string(lanes_.size()) + " workers)");
    return lanes_[static_cast<std::size_t>(rank)];
  }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::span<const Lane> lanes() const noexcept { return lanes_; }

  /// Writes this timeline alone as a Chrome trace; throws std::runtime_error naming the file.
  void save(const std::string& path) const;

 private:
  std::string name_;
  std::vector<Lane> lanes_;
};

namespace detail {
inline void json_string(std::ostream& os, const std::string& s) {
  os << '"';
  for (char c : s) {
    if (c == '"' || c == '\\') os << '\\' << c;
    else if (static_cast<unsigned char>(c) < 0x20) os << ' ';
    else os << c;
  }
  os << '"';
}
}  // namespace detail

/// Writes timelines as one Chrome trace: one process per timeline (named after it), two
/// tracks per worker ("worker i" with steps and waits, "worker i network" with all-reduces).
/// Each timeline's clock starts at its first event, so runs can be compared side by side.
inline void write_chrome_trace(std::ostream& os, std::span<const Timeline* const> timelines) {
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) os << ",\n";
    first = false;
  };
  for (std::size_t p = 0; p < timelines.size(); ++p) {
    const Timeline& t = *timelines[p];
    sep();
    os << R"({"name":"process_name","ph":"M","pid":)" << p << R"(,"args":{"name":)";
    detail::json_string(os, t.name());
    os << "}}";
    comm::Clock::time_point origin = comm::Clock::time_point::max();
    for (const Lane& lane : t.lanes())
      for (const Event& e : lane.events()) origin = std::min(origin, e.start);
    for (std::size_t w = 0; w < t.lanes().size(); ++w) {
      for (int net = 0; net < 2; ++net) {
        sep();
        os << R"({"name":"thread_name","ph":"M","pid":)" << p << R"(,"tid":)" << 2 * w + static_cast<std::size_t>(net)
           << R"(,"args":{"name":"worker )" << w << (net ? " network" : "") << "\"}}";
      }
      for (const Event& e : t.lanes()[w].events()) {
        const double ts = std::chrono::duration<double, std::micro>(e.start - origin).count();
        const double dur = std::chrono::duration<double, std::micro>(e.end - e.start).count();
        const char* name = e.kind == Kind::step ? "step" : e.kind == Kind::wait ? "wait" : "all-reduce";
        const char* cat = e.kind == Kind::step ? "compute" : e.kind == Kind::wait ? "wait" : "communication";
        const std::size_t tid = 2 * w + (e.kind == Kind::all_reduce ? 1 : 0);
        sep();
        os << R"({"name":")" << name << R"(","cat":")" << cat << R"(","ph":"X","pid":)" << p << R"(,"tid":)" << tid
           << R"(,"ts":)" << ts << R"(,"dur":)" << dur << R"(,"args":{"step":)" << e.index << "}}";
      }
    }
  }
  os << "\n]}\n";
}

/// Writes timelines as one Chrome trace file; throws std::runtime_error naming the file.
inline void save_chrome_trace(const std::string& path, std::span<const Timeline* const> timelines) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cocod::trace: cannot open '" + path + "' for writing");
  out.precision(3);
  out << std::fixed;
  write_chrome_trace(out, timelines);
  out.flush();
  if (!out) throw std::runtime_error("cocod::trace: writing '" + path + "' failed");
}

inline void Timeline::save(const std::string& path) const {
  const Timeline* one[] = {this};
  save_chrome_trace(path, one);
}

}  // namespace cocod::trace
