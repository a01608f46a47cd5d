// Least squares on the GPU: the data, the parameters and the gradient live in device memory;
// the gradient of a mini-batch is two cuBLAS matrix-vector products. The optimizer's buffers and
// kernels are on the device too (backend::cuda). Workers are threads sharing one GPU
// (comm::Threads, staged through host memory), or one per GPU over NCCL (--comm nccl).
//
//   cuda_least_squares --algo all --workers 2 --period 8 --latency auto
//   cuda_least_squares --comm nccl --algo cocod,local
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/gather.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/inner_product.h>
#include <thrust/transform.h>

#include <cocod.hpp>
#if COCOD_HAS_NCCL
#include <cocod/comm/nccl.hpp>
#endif

#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "compare.hpp"

namespace {
int dim = 1024;                   // --dim
std::size_t samples = 16384;      // --samples (per worker)

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string("cuBLAS: ") + what + " failed");
}

struct Gather {  // Ab(i, j) = A(i, batch[j]): the batch's columns, side by side
  const double* A;
  const std::size_t* batch;
  int d;
  __host__ __device__ double operator()(std::size_t k) const {
    return A[batch[k / d] * static_cast<std::size_t>(d) + k % d];
  }
};

class GpuLeastSquares {
 public:
  GpuLeastSquares(std::uint64_t seed, int rank) : x_(static_cast<std::size_t>(dim), 0.0) {
    // The same synthetic data as the CPU example: a_i ~ U[-1,1]^d, b_i = a_i . x* + noise.
    cocod::Rng rng(seed * 1000003 + static_cast<std::uint64_t>(rank)), truth(seed);
    std::vector<double> x_star(static_cast<std::size_t>(dim)), A(static_cast<std::size_t>(dim) * samples), b(samples);
    for (auto& v : x_star) v = truth.uniform() * 2 - 1;
    for (std::size_t j = 0; j < samples; ++j) {
      double dot = 0;
      for (int i = 0; i < dim; ++i) {
        const double a = rng.uniform() * 2 - 1;
        A[j * static_cast<std::size_t>(dim) + static_cast<std::size_t>(i)] = a;
        dot += a * x_star[static_cast<std::size_t>(i)];
      }
      b[j] = dot + 0.1 * (rng.uniform() - 0.5);
    }
    A_ = A;
    b_ = b;
    if (cublasCreate(&handle_) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cuBLAS: cublasCreate failed");
  }
  GpuLeastSquares(GpuLeastSquares&& o) noexcept
      : A_(std::move(o.A_)), b_(std::move(o.b_)), x_(std::move(o.x_)), Ab_(std::move(o.Ab_)), r_(std::move(o.r_)),
        batch_(std::move(o.batch_)), handle_(std::exchange(o.handle_, nullptr)) {}
  ~GpuLeastSquares() {
    if (handle_) cublasDestroy(handle_);
  }

  thrust::device_vector<double>& parameters() { return x_; }
  std::size_t num_samples() const { return samples; }
  double loss_and_gradient(std::span<const std::size_t> batch, cocod::device_span<double> gradient) {
    const int M = static_cast<int>(batch.size());
    batch_.assign(batch.begin(), batch.end());
    Ab_.resize(static_cast<std::size_t>(M) * static_cast<std::size_t>(dim));
    r_.resize(static_cast<std::size_t>(M));
    thrust::transform(thrust::device, thrust::counting_iterator<std::size_t>(0),
                      thrust::counting_iterator<std::size_t>(Ab_.size()), Ab_.begin(),
                      Gather{thrust::raw_pointer_cast(A_.data()), thrust::raw_pointer_cast(batch_.data()), dim});
    // r = b_batch, then r = Ab^T x - r
    thrust::gather(thrust::device, batch_.begin(), batch_.end(), b_.begin(), r_.begin());
    const double one = 1, minus_one = -1, inv_m = 1.0 / M, zero = 0;
    check(cublasDgemv(handle_, CUBLAS_OP_T, dim, M, &one, thrust::raw_pointer_cast(Ab_.data()), dim,
                      thrust::raw_pointer_cast(x_.data()), 1, &minus_one, thrust::raw_pointer_cast(r_.data()), 1),
          "gemv r");
    // g = Ab r / M
    check(cublasDgemv(handle_, CUBLAS_OP_N, dim, M, &inv_m, thrust::raw_pointer_cast(Ab_.data()), dim,
                      thrust::raw_pointer_cast(r_.data()), 1, &zero, gradient.data(), 1),
          "gemv g");
    const double rr = thrust::inner_product(thrust::device, r_.begin(), r_.end(), r_.begin(), 0.0);
    return 0.5 * rr / M;
  }

 private:
  thrust::device_vector<double> A_, b_, x_, Ab_, r_;
  thrust::device_vector<std::size_t> batch_;
  cublasHandle_t handle_ = nullptr;
};
}  // namespace

int main(int argc, char** argv) {
  example::Args defaults;
  defaults.learning_rate = 0.2;
  defaults.batch = 1024;
  defaults.epochs = 5;
  example::Cli options(
      "Least squares on the GPU (cuBLAS gradients, device-side optimizer): round times of each algorithm.", defaults);
  options.app().add_option("--dim", dim, "model dimension")
      ->type_name("D")->capture_default_str()->check(cli::whole(1, 1u << 20))->group("Least squares");
  options.app().add_option("--samples", samples, "samples per worker")
      ->type_name("S")->capture_default_str()->check(cli::whole(1, 1u << 26))->group("Least squares");
  const auto args = options.parse(argc, argv);
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cuda_least_squares: no usable CUDA device (%s)\n",
                 status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
    return 1;
  }
  auto make = [&](int rank, int) { return GpuLeastSquares(args.seed, rank); };
  auto evaluate = [&](GpuLeastSquares& m) {
    std::vector<double> x(m.parameters().begin(), m.parameters().end());
    double norm = 0;
    for (double v : x) norm += v * v;
    return std::vector<std::pair<std::string, double>>{{"param_norm", std::sqrt(norm)}};
  };
  return example::compare(argc, argv, args, static_cast<std::size_t>(dim), make, evaluate);
}
