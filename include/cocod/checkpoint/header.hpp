#pragma once
// The header of a worker's checkpoint file (who wrote it, for which model and run) and the
// options it was taken with, and the check that a file fits the run that resumes from it:
// every difference is a CheckpointError that names the file and what differs.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cocod/checkpoint/format.hpp"
#include "cocod/options.hpp"

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
  double weight = 0.0;             ///< w_i when the checkpoint was taken
  std::uint64_t fingerprint = 0;   ///< of the options that must match
};

/// FNV-1a over the options a resumed run must share with the saved one.
[[nodiscard]] inline std::uint64_t fingerprint(const Options& o) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  };
  const unsigned char nesterov = o.nesterov ? 1 : 0;
  const std::uint64_t period = o.period, batch = o.batch_size, speeds = o.speeds.size();
  mix(&o.learning_rate, sizeof(double));
  mix(&o.momentum, sizeof(double));
  mix(&nesterov, 1);
  mix(&o.weight_decay, sizeof(double));
  mix(&period, sizeof period);
  mix(&batch, sizeof batch);
  mix(&speeds, sizeof speeds);
  for (const double s : o.speeds) mix(&s, sizeof s);
  mix(&o.seed, sizeof o.seed);
  const std::string family = o.family();
  mix(family.data(), family.size());
  return h;
}

inline void write_header(FileWriter& file, const Header& h, const Options& o) {
  FieldWriter f;
  f.text("algorithm", h.algorithm);
  f.value("scalar_bytes", h.scalar_bytes);
  f.value("workers", h.workers);
  f.value("rank", h.rank);
  f.value("parameters", h.parameters);
  f.value("round", h.round);
  f.value("step", h.step);
  f.value("weight", h.weight);
  f.value("fingerprint", h.fingerprint);
  file.section("header", f);
  FieldWriter opts;
  opts.value("learning_rate", o.learning_rate);
  opts.value("momentum", o.momentum);
  opts.value("nesterov", static_cast<std::uint8_t>(o.nesterov));
  opts.value("weight_decay", o.weight_decay);
  opts.value("period", static_cast<std::uint64_t>(o.period));
  opts.value("batch_size", static_cast<std::uint64_t>(o.batch_size));
  opts.values("speeds", std::span<const double>(o.speeds));
  opts.value("seed", o.seed);
  const Outer outer = o.outer.value_or(Outer{});
  opts.value("outer", static_cast<std::uint8_t>(o.outer.has_value()));
  opts.value("outer.learning_rate", outer.learning_rate);
  opts.value("outer.momentum", outer.momentum);
  opts.value("outer.nesterov", static_cast<std::uint8_t>(outer.nesterov));
  opts.value("compress", static_cast<std::uint8_t>(o.compress));
  opts.value("compress_block", static_cast<std::uint64_t>(o.compress_block));
  opts.value("fragments", static_cast<std::uint64_t>(o.fragments));
  opts.value("fragment_merge", static_cast<std::uint8_t>(o.fragment_merge));
  opts.value("fragment_alpha", o.fragment_alpha);
  opts.value("pull_alpha", o.pull_alpha);
  opts.value("anchor_momentum", o.anchor_momentum);
  file.section("options", opts);
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
  h.fingerprint = f.value<std::uint64_t>("fingerprint");
  f.finish();
  return h;
}

/// The options a file was saved with.
[[nodiscard]] inline Options read_options(const FileReader& file) {
  auto f = file.fields("options");
  Options o;
  o.learning_rate = f.value<double>("learning_rate");
  o.momentum = f.value<double>("momentum");
  o.nesterov = f.value<std::uint8_t>("nesterov") != 0;
  o.weight_decay = f.value<double>("weight_decay");
  o.period = static_cast<std::size_t>(f.value<std::uint64_t>("period"));
  o.batch_size = static_cast<std::size_t>(f.value<std::uint64_t>("batch_size"));
  o.speeds = f.values<double>("speeds");
  o.seed = f.value<std::uint64_t>("seed");
  const bool outer = f.value<std::uint8_t>("outer") != 0;
  Outer rule;
  rule.learning_rate = f.value<double>("outer.learning_rate");
  rule.momentum = f.value<double>("outer.momentum");
  rule.nesterov = f.value<std::uint8_t>("outer.nesterov") != 0;
  if (outer) o.outer = rule;
  o.compress = static_cast<Compression>(f.value<std::uint8_t>("compress"));
  o.compress_block = static_cast<std::size_t>(f.value<std::uint64_t>("compress_block"));
  o.fragments = static_cast<std::size_t>(f.value<std::uint64_t>("fragments"));
  o.fragment_merge = static_cast<FragmentMerge>(f.value<std::uint8_t>("fragment_merge"));
  o.fragment_alpha = f.value<double>("fragment_alpha");
  o.pull_alpha = f.value<double>("pull_alpha");
  o.anchor_momentum = f.value<double>("anchor_momentum");
  f.finish();
  return o;
}

/// Throws CheckpointError naming the file and the first difference between the file and the
/// run that reads it. `any_workers`: the number of workers may differ (an elastic resume).
inline void check_fits(const FileReader& file, const Header& found, const Header& run, const Options& options,
                       bool any_workers) {
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
  if (found.fingerprint != run.fingerprint) {
    const Options saved = read_options(file);
    auto num = [](double v) {
      char b[32];
      std::snprintf(b, sizeof b, "%.17g", v);
      return std::string(b);
    };
    if (saved.learning_rate != options.learning_rate) differs("Options::learning_rate", num(saved.learning_rate), num(options.learning_rate));
    if (saved.momentum != options.momentum) differs("Options::momentum", num(saved.momentum), num(options.momentum));
    if (saved.nesterov != options.nesterov) differs("Options::nesterov", saved.nesterov ? "true" : "false", options.nesterov ? "true" : "false");
    if (saved.weight_decay != options.weight_decay) differs("Options::weight_decay", num(saved.weight_decay), num(options.weight_decay));
    if (saved.period != options.period) differs("Options::period", std::to_string(saved.period), std::to_string(options.period));
    if (saved.batch_size != options.batch_size)
      differs("Options::batch_size", std::to_string(saved.batch_size), std::to_string(options.batch_size));
    if (saved.seed != options.seed) differs("Options::seed", std::to_string(saved.seed), std::to_string(options.seed));
    auto outer_text = [&](const std::optional<Outer>& r) {
      return r ? "{" + num(r->learning_rate) + ", " + num(r->momentum) + (r->nesterov ? ", nesterov}" : "}") : std::string("none");
    };
    const bool same_outer = saved.outer.has_value() == options.outer.has_value() &&
                            (!saved.outer || (saved.outer->learning_rate == options.outer->learning_rate &&
                                              saved.outer->momentum == options.outer->momentum &&
                                              saved.outer->nesterov == options.outer->nesterov));
    if (!same_outer) differs("Options::outer", outer_text(saved.outer), outer_text(options.outer));
    if (saved.compress != options.compress) differs("Options::compress", compress::name(saved.compress), compress::name(options.compress));
    if (saved.compress_block != options.compress_block)
      differs("Options::compress_block", std::to_string(saved.compress_block), std::to_string(options.compress_block));
    if (saved.fragments != options.fragments)
      differs("Options::fragments", std::to_string(saved.fragments), std::to_string(options.fragments));
    auto merge = [](FragmentMerge m) { return std::string(m == FragmentMerge::lerp ? "lerp" : "add_back"); };
    if (saved.fragment_merge != options.fragment_merge) differs("Options::fragment_merge", merge(saved.fragment_merge), merge(options.fragment_merge));
    if (saved.fragment_alpha != options.fragment_alpha) differs("Options::fragment_alpha", num(saved.fragment_alpha), num(options.fragment_alpha));
    if (saved.pull_alpha != options.pull_alpha) differs("Options::pull_alpha", num(saved.pull_alpha), num(options.pull_alpha));
    if (saved.anchor_momentum != options.anchor_momentum)
      differs("Options::anchor_momentum", num(saved.anchor_momentum), num(options.anchor_momentum));
    // Speeds are one per worker: with a new number of workers they are new.
    const bool elastic = any_workers && found.workers != run.workers;
    if (saved.speeds != options.speeds && !elastic)
      differs("Options::speeds", std::to_string(saved.speeds.size()) + " entries", std::to_string(options.speeds.size()) + " entries, or other values");
    if (saved.speeds == options.speeds || !elastic) file.fail("does not fit this run: its options fingerprint differs");
  }
}

}  // namespace cocod::checkpoint
