// Bandwidth of the device backend's fused kernels against a device-to-device copy measured in
// the same run (the practical bandwidth ceiling). nccl-tests style output; CSV with --csv FILE.
//   cuda_kernels [--elements N] [--repeats R] [--csv FILE]
// GB/s = bytes moved / time, bytes = (buffers read + buffers written) * N * sizeof(T):
//   copy 2, scale 2, local_update (SGD) 3, local_update (momentum) 5, adam_update (AdamW) 7, round_end 6.
#include <cuda_runtime.h>
#include <thrust/device_vector.h>

#include "cli.hpp"  // examples/common: the command-line checks
#include <cocod.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {
using T = float;
using Device = cocod::backend::cuda;  // (a plain `cuda` would clash with libcudacxx's namespace)

double median_ms(int repeats, const std::function<void()>& f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> t;
  f();  // warm-up
  for (int i = 0; i < repeats; ++i) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::nth_element(t.begin(), t.begin() + static_cast<long>(t.size() / 2), t.end());
  return t[t.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  std::size_t n = std::size_t(1) << 26;  // 64 Mi floats = 256 MiB per buffer
  int repeats = 20;
  std::string csv;
  CLI::App app("The device backend's fused kernels against a device-to-device copy.");
  cli::last_value_wins(app);
  app.add_option("--elements", n, "floats per buffer")->type_name("N")->capture_default_str()->check(cli::whole(1, 1ull << 32));
  app.add_option("--repeats", repeats, "timed repeats; times are medians over them")
      ->type_name("R")->capture_default_str()->check(cli::whole(1, 100000));
  app.add_option("--csv", csv, "also write the table to FILE as CSV")->type_name("FILE");
  cli::parse(app, argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("# cuda_kernels: SKIPPED, no usable CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  thrust::device_vector<T> x(n, T(1)), g(n, T(0.5)), v(n, T(0.25)), a(n, T(2)), s(n, T(3)), c(n);
  auto X = cocod::as_span(x), G = cocod::as_span(g), V = cocod::as_span(v), A = cocod::as_span(a), S = cocod::as_span(s),
       C = cocod::as_span(c);

  struct Row {
    const char* name;
    int streams;
    double ms;
    bool ok;
  };
  std::vector<Row> rows;
  const double copy_ms = median_ms(repeats, [&] { cudaMemcpy(C.data(), X.data(), n * sizeof(T), cudaMemcpyDeviceToDevice); });
  rows.push_back({"d2d copy (reference)", 2, copy_ms, c[n - 1] == x[n - 1]});
  rows.push_back({"scale", 2, median_ms(repeats, [&] { cocod::backend::scale(Device{}, C, S, T(0.5)); }), c[n / 2] == T(1.5)});
  // Correctness of the update kernels: one call on fresh values, checked against the formula.
  auto check_sgd = [&] {
    thrust::fill(x.begin(), x.end(), T(1));
    cocod::backend::local_update(Device{}, X, G, V, T(0.1), T(0), T(0), false);
    return std::abs(x[7] - (T(1) - T(0.1) * T(0.5))) < 1e-6f;
  }();
  rows.push_back({"local_update sgd", 3, median_ms(repeats, [&] { cocod::backend::local_update(Device{}, X, G, V, T(1e-6), T(0), T(0), false); }), check_sgd});
  auto check_momentum = [&] {
    thrust::fill(x.begin(), x.end(), T(1));
    thrust::fill(v.begin(), v.end(), T(0.25));
    cocod::backend::local_update(Device{}, X, G, V, T(0.1), T(0.9), T(0), false);
    const T vv = T(0.9) * T(0.25) + T(0.5);
    return std::abs(v[9] - vv) < 1e-6f && std::abs(x[9] - (T(1) - T(0.1) * vv)) < 1e-6f;
  }();
  rows.push_back({"local_update momentum", 5, median_ms(repeats, [&] { cocod::backend::local_update(Device{}, X, G, V, T(1e-6), T(0.9), T(0), false); }), check_momentum});
  auto check_adamw = [&] {  // the first step on fresh values: every weight moves by lr, against g's sign
    thrust::fill(x.begin(), x.end(), T(1));
    thrust::fill(v.begin(), v.end(), T(0));
    thrust::fill(a.begin(), a.end(), T(0));
    cocod::backend::adam_update(Device{}, X, G, A, V, 0.1, 0.9, 0.999, 1e-8, 0.0, true, 1);
    return std::abs(x[13] - T(0.9)) < 1e-5f && std::abs(a[13] - T(0.05)) < 1e-6f;
  }();
  rows.push_back({"adam_update adamw", 7, median_ms(repeats, [&] {
    cocod::backend::adam_update(Device{}, X, G, A, V, 1e-9, 0.9, 0.999, 1e-8, 0.01, true, 1);
  }), check_adamw});
  auto check_round = [&] {
    thrust::fill(x.begin(), x.end(), T(1));
    thrust::fill(a.begin(), a.end(), T(2));
    thrust::fill(s.begin(), s.end(), T(3));
    cocod::backend::round_end(Device{}, X, A, S, T(0.5));
    return x[11] == T(2) && a[11] == T(2) && s[11] == T(1);
  }();
  rows.push_back({"round_end", 6, median_ms(repeats, [&] { cocod::backend::round_end(Device{}, X, A, S, T(0.5)); }), check_round});

  std::printf("# cuda_kernels: %s, %zu float elements, median of %d runs\n", prop.name, n, repeats);
  std::printf("# %-24s %8s %12s %10s %10s %8s %6s\n", "kernel", "streams", "bytes", "time", "bandwidth", "vs_copy", "check");
  std::printf("# %-24s %8s %12s %10s %10s %8s %6s\n", "", "", "(B)", "(us)", "(GB/s)", "", "");
  const double copy_gbs = 2.0 * n * sizeof(T) / (copy_ms * 1e-3) / 1e9;
  bool all_ok = true;
  FILE* out = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  if (out) std::fprintf(out, "kernel,streams,bytes,time_us,gbps,vs_copy,check\n");
  for (const auto& r : rows) {
    const double bytes = static_cast<double>(r.streams) * n * sizeof(T);
    const double gbs = bytes / (r.ms * 1e-3) / 1e9;
    all_ok = all_ok && r.ok;
    std::printf("  %-24s %8d %12.0f %10.1f %10.1f %8.3f %6s\n", r.name, r.streams, bytes, r.ms * 1e3, gbs, gbs / copy_gbs,
                r.ok ? "OK" : "FAIL");
    if (out) std::fprintf(out, "%s,%d,%.0f,%.3f,%.3f,%.4f,%s\n", r.name, r.streams, bytes, r.ms * 1e3, gbs, gbs / copy_gbs, r.ok ? "OK" : "FAIL");
  }
  if (out) std::fclose(out);
  std::printf("# %s\n", all_ok ? "OK" : "FAILED");
  return all_ok ? 0 : 1;
}
