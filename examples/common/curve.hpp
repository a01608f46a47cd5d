#pragma once
// The examples' files: the curve of metrics against wall time (CSV, --curve) and the Chrome
// trace of every run (--trace). Example code, not part of the library.
#include <cocod.hpp>

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "run.hpp"

namespace example {

/// The curve file: one row per snapshot of rank 0's model, and the final consensus model.
inline void write_curve(const std::string& path, const std::vector<Result>& results) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot open '" + path + "' for writing");
  out << "algorithm,sampling,epoch,wall_s";
  for (const auto& [name, v] : results.front().metrics) out << ',' << name;
  out << '\n';
  for (const auto& r : results)
    for (const auto& p : r.curve) {
      out << display_name(r.key) << ',' << r.sampling << ',' << p.epoch << ',' << p.wall_s;
      for (const auto& [name, v] : p.metrics) out << ',' << v;
      out << '\n';
    }
  if (!out.flush()) throw std::runtime_error("writing '" + path + "' failed");
}

/// The Chrome trace of every run: in-process workers share one file; each MPI process writes
/// its own lane's file (`path`.rank<r>). Returns the path written.
inline std::string write_trace(std::string path, const std::vector<Result>& results, bool per_process, int rank) {
  std::vector<const cocod::trace::Timeline*> timelines;
  for (const auto& r : results) timelines.push_back(r.timeline.get());
  if (per_process) path += ".rank" + std::to_string(rank);
  cocod::trace::save_chrome_trace(path, timelines);
  return path;
}

}  // namespace example
