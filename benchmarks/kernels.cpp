// The CPU backend's memory passes against a STREAM triad measured in the same run.
//
//   kernels [--mib M] [--repeats R] [--csv FILE]
//
// For 1 and 2 threads (each thread its own arrays, like in-process workers): the STREAM triad
// a = b + s*c, CoCoD-SGD's fused round end (x += s - a; a = x; s = w*x), the local update with
// momentum (v = mu*v + g; x -= lr*v), plain SGD (x -= lr*g), AdamW (x *= 1 - lr*wd; m and v
// updated; x -= step*m/(sqrt(v)/b + eps): 4 arrays read, 3 written), the send-buffer scale
// (s = w*x) and the non-finite guard's check of a contribution (all_finite: one read).
// Two bandwidths: STREAM's (bytes read + written) and the memory traffic, which adds a read of
// every array that is written without being read (write-allocate: the triad's a, the scale's s).
// vs_triad compares memory traffic, what the hardware actually moves. The kernels are interleaved within each repeat; medians over repeats. Correctness:
// every kernel is compared element by element with a scalar loop of the documented formula.
#include <cocod.hpp>

#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <limits>
#include <vector>

#include "cli.hpp"  // examples/common: the command-line checks
#include "common/table.hpp"

namespace {
using T = float;
using cocod::backend::cpu;

struct Arrays {
  std::vector<T> x, y, z, u;  // u: AdamW's second moment
  explicit Arrays(std::size_t n) : x(n, T(1)), y(n, T(2)), z(n, T(0.5)), u(n, T(0.25)) {}
};

struct Kernel {
  const char* name;
  int streams;      // arrays read + arrays written, per element (STREAM's count)
  int write_only;   // arrays written without being read: their cache lines are read first
                    // (write-allocate), so the memory moves one more stream for each
  std::function<void(Arrays&)> run;
};

const T s = T(0.5), w = T(0.25), lr = T(0.01), mu = T(0.9);
volatile bool finite_sink = false;  // keeps the all_finite pass from being optimised away

std::vector<Kernel> kernels() {
  return {
      {"triad", 3, 1, [](Arrays& a) {
         T* __restrict x = a.x.data();
         const T* __restrict y = a.y.data();
         const T* __restrict z = a.z.data();
         for (std::size_t i = 0, n = a.x.size(); i < n; ++i) x[i] = y[i] + s * z[i];
       }},
      {"round_end", 6, 0, [](Arrays& a) { cocod::backend::round_end(cpu{}, std::span<T>(a.x), std::span<T>(a.y), std::span<T>(a.z), w); }},
      {"update_momentum", 5, 0, [](Arrays& a) {
         cocod::backend::local_update(cpu{}, std::span<T>(a.x), std::span<const T>(a.y), std::span<T>(a.z), lr, mu, T(0), false);
       }},
      {"update_adamw", 7, 0, [](Arrays& a) {
         cocod::backend::adam_update(cpu{}, std::span<T>(a.x), std::span<const T>(a.y), std::span<T>(a.z), std::span<T>(a.u),
                                     1e-6, 0.9, 0.999, 1e-8, 0.01, true, 1);
       }},
      {"update_sgd", 3, 0, [](Arrays& a) {
         cocod::backend::local_update(cpu{}, std::span<T>(a.x), std::span<const T>(a.y), std::span<T>(), lr, T(0), T(0), false);
       }},
      {"scale", 2, 1, [](Arrays& a) { cocod::backend::scale(cpu{}, std::span<T>(a.z), std::span<const T>(a.x), w); }},
      // the non-finite guard's pass over a contribution before it is reduced
      {"all_finite", 1, 0, [](Arrays& a) { finite_sink = cocod::backend::all_finite(cpu{}, std::span<const T>(a.x)); }},
  };
}

/// Each kernel against a scalar loop of its formula, on a small odd size.
bool correct(const Kernel& k) {
  const std::size_t n = 10007;
  Arrays a(n), r(n);
  for (std::size_t i = 0; i < n; ++i) {
    a.x[i] = r.x[i] = T(0.001) * static_cast<T>(i % 97);
    a.y[i] = r.y[i] = T(0.5) - T(0.003) * static_cast<T>(i % 31);
    a.z[i] = r.z[i] = T(0.2) + T(0.0007) * static_cast<T>(i % 13);
    a.u[i] = r.u[i] = T(0.01) + T(0.0003) * static_cast<T>(i % 7);
  }
  k.run(a);
  const std::string name = k.name;
  for (std::size_t i = 0; i < n; ++i) {
    if (name == "triad") r.x[i] = r.y[i] + s * r.z[i];
    if (name == "round_end") {
      r.x[i] = r.x[i] + (r.z[i] - r.y[i]);
      r.y[i] = r.x[i];
      r.z[i] = w * r.x[i];
    }
    if (name == "update_momentum") {
      r.z[i] = mu * r.z[i] + r.y[i];
      r.x[i] = r.x[i] - lr * r.z[i];
    }
    if (name == "update_adamw") {  // the first step: bias corrections 1 - 0.9 and 1 - 0.999
      r.x[i] = r.x[i] * static_cast<T>(1.0 - 1e-6 * 0.01);
      r.z[i] = T(0.9) * r.z[i] + static_cast<T>(1.0 - 0.9) * r.y[i];
      r.u[i] = T(0.999) * r.u[i] + static_cast<T>(1.0 - 0.999) * r.y[i] * r.y[i];
      const T denom = std::sqrt(r.u[i]) / static_cast<T>(std::sqrt(1.0 - 0.999)) + T(1e-8);
      r.x[i] = r.x[i] - static_cast<T>(1e-6 / (1.0 - 0.9)) * (r.z[i] / denom);
    }
    if (name == "update_sgd") r.x[i] = r.x[i] - lr * r.y[i];
    if (name == "scale") r.z[i] = w * r.x[i];
  }
  if (name == "all_finite") {  // true on finite data, false once a NaN is in it
    if (!finite_sink) return false;
    a.x[n / 2] = std::numeric_limits<T>::quiet_NaN();
    k.run(a);
    return !finite_sink;
  }
  return a.x == r.x && a.y == r.y && a.z == r.z && a.u == r.u;
}
}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 64;  // per array: far beyond the caches
  int repeats = 15;
  std::string csv;
  CLI::App app("The CPU backend's kernels against a STREAM triad, for 1 and 2 threads.");
  cli::last_value_wins(app);
  app.add_option("--mib", mib, "MiB per array (each thread has four)")
      ->type_name("M")->capture_default_str()->check(cli::whole(1, 4096));
  app.add_option("--repeats", repeats, "timed repeats; times are medians over them")
      ->type_name("R")->capture_default_str()->check(cli::whole(1, 100000));
  app.add_option("--csv", csv, "also write the table to FILE as CSV")->type_name("FILE");
  cli::parse(app, argc, argv);
  const std::size_t n = mib * (1u << 20) / sizeof(T);
  const auto ks = kernels();
  const unsigned cores = std::thread::hardware_concurrency();
  bench::Table table("cocod kernels against a STREAM triad, float, " + std::to_string(mib) + " MiB per array, " +
                         std::to_string(repeats) + " repeats (medians), " + std::to_string(cores) + " cores, " + bench::today(),
                     {{"kernel", "", 16, -1}, {"threads", "", 7, -1}, {"bytes", "MiB", 8, 0}, {"time", "ms", 9, 3},
                      {"stream_bw", "GB/s", 9, 2}, {"traffic_bw", "GB/s", 10, 2}, {"vs_triad", "", 8, 3},
                      {"correct", "", 7, -1}},
                     csv);
  bool all_fast = true;
  for (unsigned threads : {1u, 2u}) {
    std::vector<Arrays> arrays;
    for (unsigned t = 0; t < threads; ++t) arrays.emplace_back(n);
    std::vector<std::vector<double>> times(ks.size());
    std::barrier sync(static_cast<std::ptrdiff_t>(threads));
    auto worker = [&](unsigned t) {
      for (int r = -1; r < repeats; ++r)  // r = -1: warm-up (page faults)
        for (std::size_t k = 0; k < ks.size(); ++k) {
          sync.arrive_and_wait();
          const auto t0 = std::chrono::steady_clock::now();
          ks[k].run(arrays[t]);
          sync.arrive_and_wait();  // the slowest thread ends the pass
          if (t == 0 && r >= 0) times[k].push_back(bench::seconds_since(t0));
        }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker, t);
    worker(0);
    for (auto& th : pool) th.join();
    double triad_bw = 0;
    for (std::size_t k = 0; k < ks.size(); ++k) {
      const double array = static_cast<double>(n * sizeof(T)) * threads;
      const double bytes = ks[k].streams * array, traffic = (ks[k].streams + ks[k].write_only) * array;
      const double t = bench::median(times[k]);
      const double bw = traffic / t / 1e9;
      if (k == 0) triad_bw = bw;
      const double ratio = bw / triad_bw;
      if (k > 0 && ratio < 0.8) all_fast = false;
      const bool ok = correct(ks[k]);
      table.row({ks[k].name, std::to_string(threads), table.number(2, bytes / (1 << 20)), table.number(3, t * 1e3),
                 table.number(4, bytes / t / 1e9), table.number(5, bw), table.number(6, ratio), ok ? "OK" : "WRONG"},
                ok);
    }
  }
  std::printf("# target: every kernel >= 0.8 of the triad's bandwidth: %s\n", all_fast ? "met" : "NOT met");
  return table.finish("kernels");
}
