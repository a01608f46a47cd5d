#pragma once
// The header of a worker's checkpoint file (who wrote it, for which model and run), and the check
// that a file fits the run that resumes from it: every difference is a CheckpointError that
// names the file and what differs. The settings a run must share follow in section "settings".
#include <cstdint>
#include <string>

#include "cocod/checkpoint/format.hpp"

namespace cocod::checkpoint {

/// Who wrote a file, and where the run was.
struct Header {
  std::string algorithm;
  std::uint32_t scalar_bytes = 0;  ///< 4: float, 8: double
  std::uint32_t workers = 0;
  std::uint32_t rank = 0;
  std::uint64_t parameters = 0;
  std::uint64_t round = 0;
  std::uint64_t step = 0;
  double weight = 0.0;  ///< w_i when the checkpoint was taken
};

inline void write_header(FileWriter& file, const Header& h) {
  FieldWriter f;
  f.text("algorithm", h.algorithm);
  f.value("scalar_bytes", h.scalar_bytes);
  f.value("workers", h.workers);
  f.value("rank", h.rank);
  f.value("parameters", h.parameters);
  f.value("round", h.round);
  f.value("step", h.step);
  f.value("weight", h.weight);
  file.section("header", f);
}

[[nodiscard]] inline Header read_header(const FileReader& file) {
  auto f = file.fields("header");
  Header h;
  h.algorithm = f.text("algorithm");
  h.scalar_bytes = f.value<std::uint32_t>("scalar_bytes");
  h.workers = f.value<std::uint32_t>("workers");
  h.rank = f.value<std::uint32_t>("rank");
  h.parameters = f.value<std::uint64_t>("parameters");
  h.round = f.value<std::uint64_t>("round");
  h.step = f.value<std::uint64_t>("step");
  h.weight = f.value<double>("weight");
  f.finish();
  return h;
}

/// Throws CheckpointError naming the file and the first difference between the file's header
/// and the run that reads it. `any_workers`: the number of workers may differ (an elastic resume).
inline void check_fits(const FileReader& file, const Header& found, const Header& run, bool any_workers) {
  auto differs = [&](const std::string& what, const std::string& saved, const std::string& now) {
    file.fail("does not fit this run: " + what + " differs (checkpoint: " + saved + ", this run: " + now + ")");
  };
  auto scalar = [](std::uint32_t b) { return b == 4 ? std::string("float") : b == 8 ? std::string("double") : std::to_string(b) + "-byte"; };
  if (found.scalar_bytes != run.scalar_bytes) differs("the scalar type", scalar(found.scalar_bytes), scalar(run.scalar_bytes));
  if (found.algorithm != run.algorithm) differs("the algorithm", found.algorithm, run.algorithm);
  if (found.parameters != run.parameters)
    differs("the parameter count", std::to_string(found.parameters), std::to_string(run.parameters));
  if (found.workers != run.workers && !any_workers)
    file.fail("does not fit this run: the number of workers differs (checkpoint: " + std::to_string(found.workers) +
              ", this run: " + std::to_string(run.workers) +
              "); to continue from its consensus model with the new number, resume with workers_may_change = true");
}

}  // namespace cocod::checkpoint
