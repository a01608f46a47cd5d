// Overlap of an NCCL all-reduce (comm::Nccl, its own stream) with compute kernels on the default
// stream: times compute alone, the all-reduce alone, and both posted together, on every GPU of
// the machine (one worker thread each). nccl-tests style output.
//   nccl_overlap [--elements N] [--repeats R]
// overlap = (compute + comm - both) / min(compute, comm): 1 = the shorter one is fully hidden.
#include <cuda_runtime.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "cli.hpp"  // examples/common: the command-line checks
#include <cocod.hpp>
#include <cocod/comm/nccl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {
struct Busy {  // a compute-bound kernel: a few hundred flops per element
  float* y;
  int iterations;
  __host__ __device__ void operator()(std::size_t i) const {
    float v = y[i];
    for (int k = 0; k < iterations; ++k) v = v * 0.9999f + 0.0001f;
    y[i] = v;
  }
};
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  std::size_t n = std::size_t(1) << 26;  // 256 MiB of floats
  int repeats = 10;
  CLI::App app("comm::Nccl's all-reduce overlapping a compute kernel on the worker's compute stream.");
  cli::last_value_wins(app);
  app.add_option("--elements", n, "floats per buffer")->type_name("N")->capture_default_str()->check(cli::whole(1, 1ull << 32));
  app.add_option("--repeats", repeats, "timed repeats; times are medians over them")
      ->type_name("R")->capture_default_str()->check(cli::whole(1, 100000));
  cli::parse(app, argc, argv);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("# nccl_overlap: SKIPPED, no usable CUDA device\n");
    return 77;
  }
  std::vector<int> devices(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) devices[static_cast<std::size_t>(i)] = i;
  std::vector<double> compute_s, comm_s, both_s;
  bool ok = true;
  cocod::comm::Nccl::run(devices, [&](cocod::comm::Nccl comm) {
    thrust::device_vector<float> buffer(n, 1.0f), work(std::size_t(1) << 24, 1.0f);
    auto run_compute = [&] {
      thrust::for_each_n(thrust::device, thrust::counting_iterator<std::size_t>(0), work.size(),
                         Busy{thrust::raw_pointer_cast(work.data()), 400});
    };
    std::vector<double> c, m, b;
    for (int r = 0; r < repeats + 1; ++r) {
      cudaDeviceSynchronize();
      auto t = std::chrono::steady_clock::now();
      run_compute();
      cudaDeviceSynchronize();
      c.push_back(seconds_since(t));
      t = std::chrono::steady_clock::now();
      comm.all_reduce(cocod::as_span(buffer));
      m.push_back(seconds_since(t));
      t = std::chrono::steady_clock::now();
      auto request = comm.all_reduce_async(cocod::as_span(buffer));  // posted first ...
      run_compute();                                                  // ... compute queued behind it
      request.wait();
      cudaDeviceSynchronize();
      b.push_back(seconds_since(t));
    }
    const float expected = std::pow(static_cast<float>(comm.size()), static_cast<float>(2 * (repeats + 1)));
    if (comm.rank() == 0) {
      c.erase(c.begin());  // warm-up
      m.erase(m.begin());
      b.erase(b.begin());
      compute_s = c;
      comm_s = m;
      both_s = b;
      ok = std::abs(static_cast<float>(buffer[0]) - expected) <= 1e-3f * expected;
    }
  });
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const double C = median(compute_s), M = median(comm_s), B = median(both_s);
  const double overlap = (C + M - B) / std::min(C, M);
  std::printf("# nccl_overlap: %d x %s, all-reduce of %zu floats (%.0f MiB), median of %d\n", count, prop.name, n,
              n * 4.0 / (1 << 20), repeats);
  std::printf("# %-10s %12s %12s %12s %10s %6s\n", "gpus", "compute", "allreduce", "both", "overlap", "check");
  std::printf("# %-10s %12s %12s %12s %10s %6s\n", "", "(ms)", "(ms)", "(ms)", "", "");
  std::printf("  %-10d %12.3f %12.3f %12.3f %10.3f %6s\n", count, C * 1e3, M * 1e3, B * 1e3, overlap, ok ? "OK" : "FAIL");
  std::printf("# %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
