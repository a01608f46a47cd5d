#pragma once
// The examples' result tables: the full one (round times against the round-time model of
// docs/algorithm.md) and the short one (--brief). Scripts read their columns: keep them stable.
// Example code, not part of the library.
#include <cocod.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "options.hpp"
#include "run.hpp"

namespace example {

/// The round-time model (docs/algorithm.md) with C = k*c measured and m the all-reduce cost;
/// `tau`: CoCoD-SGD's overlap depth in the round (k: the whole round).
inline double predicted_round(const std::string& key, std::size_t k, double C, double m, std::size_t tau) {
  const double c = C / static_cast<double>(k);
  const std::string b = Variant::parse(key).base;
  if (b == "ssgd") return C + static_cast<double>(k) * m;
  if (b == "local") return C + m;
  if (b == "pipe") return static_cast<double>(k) * std::max(c, m);
  if (b == "cocod" && tau < k) return C + std::max(0.0, m - static_cast<double>(tau) * c);  // tau steps hide m
  return std::max(C, m);  // CoCoD-SGD, Overlap-Local-SGD and Delayed-DiLoCo overlap one round
}
/// The link's cost of what a round of this row sent: 2 (N - 1) latencies (a ring all-reduce's
/// steps, or a compressed exchange's two collectives) and its bytes per worker at the bandwidth.
/// For a full all-reduce this is Link::all_reduce_seconds.
inline double link_seconds(const cocod::comm::Link& link, int workers, double bytes) {
  return workers <= 1 ? 0.0 : 2.0 * (workers - 1) * link.latency + bytes / link.bandwidth;
}
inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

/// The median over the run's rounds of a whole-number field (the period, the batch size).
inline std::size_t median_of(const cocod::Report& rep, std::size_t cocod::RoundStats::*field) {
  std::vector<std::size_t> v;
  for (const auto& r : rep.rounds) v.push_back(r.*field);
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

/// S-SGD's wall time over this row's, as text ("-" when S-SGD did not run with this sampling).
inline std::string speedup_over_ssgd(const std::vector<Result>& results, const Result& r) {
  for (const auto& other : results)
    if (other.key == "ssgd" && other.sampling == r.sampling) {
      char b[32];
      std::snprintf(b, sizeof b, "%.2f", other.report.seconds / r.report.seconds);
      return b;
    }
  return "-";
}

inline std::string row_name(const Result& r, bool with_sampling) {
  std::string name = display_name(r.key);
  if (with_sampling) name += r.sampling == "equal" ? " (eq)" : " (prop)";
  return name;
}

/// The width of the algorithm column: the longest row name, at least 17.
inline int name_width(const std::vector<Result>& results, bool with_sampling) {
  std::size_t w = 17;
  for (const auto& r : results) w = std::max(w, row_name(r, with_sampling).size());
  return static_cast<int>(w);
}

inline void print_table_header(const std::vector<Result>& results, bool throttle, int width = 17) {
  std::printf("#\n# times are medians over rounds, in ms; model = the round-time model (docs/algorithm.md) with kc measured "
              "and m %s\n",
              throttle ? "the link's cost of the bytes the row sends per round"
                       : "this row's measured all-reduce time (comm_ms, per step for S-SGD and Pipe-SGD)");
  std::printf("# k and M0 = median period and rank 0's median batch size; waited_s = rank 0's total time blocked on\n"
              "# collectives; speedup = S-SGD's wall time / this row's (S-SGD with the same sampling)\n");
  std::printf("# MB/ep = megabytes rank 0 sent per epoch (as a ring all-reduce or the compressed exchange sends them)\n");
  std::printf("# %-*s %6s %6s %3s %4s %9s %9s %9s %8s %9s %6s %8s %8s %8s %7s", width, "algorithm", "steps", "epochs", "k", "M0",
              "round_ms", "kc_ms", "comm_ms", "wait_ms", "model_ms", "ratio", "waited_s", "wall_s", "MB/ep", "speedup");
  for (const auto& [name, v] : results.front().metrics) std::printf(" %14s", name.c_str());
  std::printf("\n");
}

/// The rows: one per algorithm (and sampling), times in ms, medians over rounds of one period.
inline void print_table(const std::vector<Result>& results, const Args& args, bool throttle, const cocod::comm::Link& link,
                        int workers) {
  const bool with_sampling = args.samplings.size() > 1;
  const int width = name_width(results, with_sampling);
  print_table_header(results, throttle, width);
  for (const auto& r : results) {
    const auto& rep = r.report;
    const std::size_t k = median_of(rep, &cocod::RoundStats::period);
    // medians over the rounds whose period is the median one
    cocod::Report same_k = rep;
    std::erase_if(same_k.rounds, [&](const cocod::RoundStats& s) { return s.period != k; });
    const double round = same_k.median_round_s(), C = same_k.median_compute_s();
    // with a real network: this row's own all-reduce time, per step for S-SGD and Pipe-SGD
    // m: on a throttled link, its cost of the bytes this row sent per round (per step for S-SGD
    // and Pipe-SGD); with a real network, this row's own all-reduce time
    std::vector<double> bytes;
    for (const auto& s : same_k.rounds) bytes.push_back(s.bytes_sent);
    const double per = per_step(r.key) ? static_cast<double>(k) : 1.0;
    const double comm_cost = throttle ? link_seconds(link, workers, median_of(bytes) / per) : same_k.median_comm_s() / per;
    const std::size_t tau = settings_for(r.key, args).depth.at(k, r.hiding_steps);
    const double model = predicted_round(r.key, k, C, comm_cost, tau);
    const double waited = rep.total(&cocod::RoundStats::wait_s);
    std::printf("  %-*s %6zu %6.2f %3zu %4zu %9.3f %9.3f %9.3f %8.3f %9.3f %6.3f %8.3f %8.3f", width, row_name(r, with_sampling).c_str(),
                rep.steps, rep.epochs, k, median_of(rep, &cocod::RoundStats::batch_size), round * 1e3, C * 1e3,
                same_k.median_comm_s() * 1e3, same_k.median_wait_s() * 1e3, model * 1e3, round / model, waited, rep.seconds);
    std::printf(" %8.3f", rep.total(&cocod::RoundStats::bytes_sent) / std::max(rep.epochs, 1e-12) / 1e6);
    std::printf(" %7s", speedup_over_ssgd(results, r).c_str());
    for (const auto& [name, v] : r.metrics) std::printf(" %14.6g", v);
    std::printf("\n");
  }
}

/// The short table: what a new user asks first (how good, how fast, how much waiting).
inline void print_brief(const std::vector<Result>& results, const Args& args) {
  const bool with_sampling = args.samplings.size() > 1;
  std::printf("#\n# wall_s = training wall time (consensus included); ms/round and ms/step = medians over rounds and\n"
              "# the run's mean per step; waited = share of rank 0's time blocked on collectives;\n"
              "# speedup = S-SGD's wall time / this row's\n");
  const int width = name_width(results, with_sampling);
  std::printf("# %-*s %6s %3s", width, "algorithm", "epochs", "k");
  for (const auto& [name, v] : results.front().metrics) std::printf(" %14s", name.c_str());
  std::printf(" %8s %9s %8s %7s %8s\n", "wall_s", "ms/round", "ms/step", "waited", "speedup");
  for (const auto& r : results) {
    const auto& rep = r.report;
    const double waited = rep.total(&cocod::RoundStats::wait_s);
    std::printf("  %-*s %6.2f %3zu", width, row_name(r, with_sampling).c_str(), rep.epochs, median_of(rep, &cocod::RoundStats::period));
    for (const auto& [name, v] : r.metrics) std::printf(" %14.4f", v);
    std::printf(" %8.2f %9.2f %8.2f %6.1f%%", rep.seconds, rep.median_round_s() * 1e3,
                rep.seconds * 1e3 / static_cast<double>(std::max<std::size_t>(1, rep.steps)), 100.0 * waited / rep.seconds);
    std::printf(" %8s\n", speedup_over_ssgd(results, r).c_str());
  }
}

/// The batch sizes of every worker in the last round, one line per row (proportional sampling).
inline void print_last_batches(const std::vector<Result>& results, const Args& args, int workers) {
  std::printf("# batch sizes of the last round, worker 0..%d:\n", workers - 1);
  for (const auto& r : results) {
    std::printf("#   %-17s", row_name(r, args.samplings.size() > 1).c_str());
    for (std::size_t b : r.last_batch) std::printf(" %4zu", b);
    std::printf("\n");
  }
}

}  // namespace example
