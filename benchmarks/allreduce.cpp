// comm::Mpi's all-reduce against raw MPI_Allreduce on the same bytes (float sums), in the style
// of nccl-tests' all_reduce_perf.
//
//   mpiexec -n N allreduce [--min-bytes 4096] [--max-bytes 268435456] [--csv FILE] [--gloo]
//
// Variants, interleaved within each repeat: raw MPI_Allreduce (in place), cocod's default
// rank-ordered all-reduce (bitwise the same on every run and as comm::Threads), and cocod with
// MPI's own all-reduce (MpiOptions::deterministic = false); with --gloo also comm::Gloo among the
// same processes (over TCP on 127.0.0.1, rank 0 serving the store: the same link as MPI's when
// MPI uses TCP on the loopback). Time of one operation = the slowest
// rank's, median over repeats. algbw = bytes / time; busbw = algbw * 2(n-1)/n (the ring's load
// per link, comparable across n). Correctness: every result is checked element by element.
#include <cocod.hpp>
#include <cocod/comm/mpi.hpp>

#include <mpi.h>
#if defined(COCOD_HAS_GLOO)
#include <cocod/comm/gloo.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.hpp"  // examples/common: the command-line checks
#include "common/table.hpp"

namespace {
void fill(std::vector<float>& v, int rank) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(rank + 1) * static_cast<float>(i % 7 + 1);
}
bool check(const std::vector<float>& v, int n) {
  const float ranks = static_cast<float>(n * (n + 1) / 2);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != ranks * static_cast<float>(i % 7 + 1)) return false;
  return true;
}

struct Settings {
  std::size_t min_bytes = 4096, max_bytes = 256u << 20;
  std::string csv;
  bool gloo = false;
};

/// The command line, read before MPI starts: a refused one ends with exit status 2.
Settings parse_command_line(int argc, char** argv) {
  Settings s;
  CLI::App app("comm::Mpi's all-reduce against raw MPI_Allreduce (run under mpiexec -n N); sizes from\n"
               "--min-bytes up to --max-bytes, times 4 each step.");
  cli::last_value_wins(app);
  app.add_option("--min-bytes", s.min_bytes, "the smallest size, in bytes")
      ->type_name("B")->capture_default_str()->check(cli::whole(4, 1ull << 32));
  app.add_option("--max-bytes", s.max_bytes, "the largest size, in bytes")
      ->type_name("B")->capture_default_str()->check(cli::whole(4, 1ull << 32));
  app.add_option("--csv", s.csv, "also write the table to FILE as CSV")->type_name("FILE");
  app.add_flag("--gloo", s.gloo, "also time cocod::comm::Gloo among the same processes (TCP on 127.0.0.1)");
  cli::parse(app, argc, argv);
#if !defined(COCOD_HAS_GLOO)
  if (s.gloo) cli::refuse(argv[0], "--gloo: this build has no Gloo (Debian: libgloo-dev)");
#endif
  if (s.min_bytes > s.max_bytes)
    cli::refuse(argv[0], "--min-bytes: needs at most --max-bytes (got " + std::to_string(s.min_bytes) + " > " +
                             std::to_string(s.max_bytes) + ")");
  return s;
}
}  // namespace

int main(int argc, char** argv) {
  const auto [min_bytes, max_bytes, csv, with_gloo] = parse_command_line(argc, argv);
  cocod::comm::Mpi world(argc, argv);
  const int n = world.size(), rank = world.rank();
  cocod::comm::Mpi native(MPI_COMM_WORLD, {.deterministic = false});
  const bool prints = rank == 0;
  const int variants = with_gloo ? 4 : 3;
#if defined(COCOD_HAS_GLOO)
  std::optional<cocod::comm::Gloo> gloo;
  std::unique_ptr<cocod::rendezvous::StoreServer> store;
  if (with_gloo) {
    int port = 0;
    if (rank == 0) store = std::make_unique<cocod::rendezvous::StoreServer>("127.0.0.1", 0), port = store->port();
    MPI_Bcast(&port, 1, MPI_INT, 0, MPI_COMM_WORLD);
    gloo.emplace(cocod::comm::GlooOptions{.store = "127.0.0.1:" + std::to_string(port), .rank = rank, .size = n,
                                          .hostname = "127.0.0.1"});
  }
#endif
  std::unique_ptr<bench::Table> table;
  std::vector<bench::Column> columns{{"size", "B", 10, 0}, {"count", "elements", 9, 0}, {"repeats", "", 7, 0},
                                     {"raw_time", "us", 10, 1}, {"raw_busbw", "GB/s", 9, 3},
                                     {"cocod_time", "us", 10, 1}, {"cocod_busbw", "GB/s", 11, 3},
                                     {"native_time", "us", 11, 1}, {"native_busbw", "GB/s", 12, 3},
                                     {"cocod/raw", "speed", 9, 3}, {"native/raw", "speed", 10, 3}};
  if (with_gloo) columns.insert(columns.end(), {{"gloo_time", "us", 10, 1}, {"gloo/cocod", "speed", 10, 3}});
  columns.push_back({"correct", "", 7, -1});
  if (prints)
    table = std::make_unique<bench::Table>(
        "all-reduce of float sums: raw MPI_Allreduce vs cocod::comm::Mpi (rank-ordered) and cocod with MPI's own "
        "all-reduce" + std::string(with_gloo ? ", and cocod::comm::Gloo (rank-ordered, TCP)" : "") + "; " +
            std::to_string(n) + " ranks; medians over repeats; " + bench::today(),
        columns, csv);
  double worst = 1e9;
  for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const std::size_t count = bytes / sizeof(float);
    std::vector<float> v(count);
    const int repeats = static_cast<int>(std::clamp<std::size_t>((std::size_t{1} << 30) / bytes, 5, 50));
    std::vector<double> t[4];
    bool ok = true;
    for (int r = -1; r < repeats; ++r) {  // r = -1: warm-up
      for (int variant = 0; variant < variants; ++variant) {
        fill(v, rank);
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = std::chrono::steady_clock::now();
        if (variant == 0) MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else if (variant == 1) world.all_reduce(std::span<float>(v));
        else if (variant == 2) native.all_reduce(std::span<float>(v));
#if defined(COCOD_HAS_GLOO)
        else gloo->all_reduce(std::span<float>(v));
#endif
        double s = bench::seconds_since(t0);
        MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // the slowest rank
        if (r >= 0) t[variant].push_back(s);
        ok = ok && check(v, n);
      }
    }
    int all_ok = ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!prints) continue;
    const double raw = bench::median(t[0]), det = bench::median(t[1]), nat = bench::median(t[2]);
    const double factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
    auto busbw = [&](double s) { return static_cast<double>(bytes) / s / 1e9 * factor; };
    if (bytes >= (1u << 20)) worst = std::min(worst, raw / det);
    std::vector<std::string> cells{table->number(0, static_cast<double>(bytes)), table->number(1, static_cast<double>(count)),
                                   std::to_string(repeats), table->number(3, raw * 1e6), table->number(4, busbw(raw)),
                                   table->number(5, det * 1e6), table->number(6, busbw(det)), table->number(7, nat * 1e6),
                                   table->number(8, busbw(nat)), table->number(9, raw / det), table->number(10, raw / nat)};
    if (with_gloo) {
      const double g = bench::median(t[3]);
      cells.insert(cells.end(), {table->number(11, g * 1e6), table->number(12, det / g)});
    }
    cells.push_back(all_ok ? "OK" : "WRONG");
    table->row(cells, all_ok == 1);
  }
  if (!prints) return 0;
  std::printf("# target: cocod >= 0.95 of raw speed from 1 MiB up (the lowest there: %.3f): %s\n", worst,
              worst >= 0.95 ? "met" : "NOT met");
  return table->finish("all-reduce");
}
