// Least squares, min_x 1/n sum_i 0.5 (a_i . x - b_i)^2, split over in-process workers on a
// throttled link; every algorithm's distance to the closed-form optimum and its round times.
//
//   least_squares --algo all --workers 2 --period 8 --bandwidth 1 --latency auto
//   mpiexec -n 2 least_squares --comm mpi --algo all --period 8
#include <Eigen/Dense>

#include <cocod.hpp>

#include <cmath>

#include "compare.hpp"

namespace {
Eigen::Index dim = 256;                  // --dim
std::size_t samples_per_worker = 32768;  // --samples

/// One worker's shard: samples a_i ~ U[-1,1]^d (one per column), b = A^T x* + noise.
struct Shard {
  Eigen::MatrixXd A;
  Eigen::VectorXd b;
};
Shard make_shard(std::uint64_t seed, int rank) {
  cocod::Rng rng(seed * 1000003 + static_cast<std::uint64_t>(rank));
  cocod::Rng truth(seed);  // x* is the same for every worker
  Eigen::VectorXd x_star(dim);
  for (auto& v : x_star) v = truth.uniform() * 2 - 1;
  Shard s{Eigen::MatrixXd(dim, static_cast<Eigen::Index>(samples_per_worker)),
          Eigen::VectorXd(static_cast<Eigen::Index>(samples_per_worker))};
  for (Eigen::Index j = 0; j < s.A.cols(); ++j) {
    for (Eigen::Index i = 0; i < dim; ++i) s.A(i, j) = rng.uniform() * 2 - 1;
    s.b(j) = s.A.col(j).dot(x_star) + 0.1 * (rng.uniform() - 0.5);
  }
  return s;
}

class LeastSquares {
 public:
  explicit LeastSquares(Shard shard) : shard_(std::move(shard)), x_(Eigen::VectorXd::Zero(dim)) {}
  Eigen::VectorXd& parameters() { return x_; }
  const Eigen::VectorXd& parameters() const { return x_; }
  std::size_t num_samples() const { return static_cast<std::size_t>(shard_.A.cols()); }
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<double> gradient) {
    Eigen::Map<Eigen::VectorXd> g(gradient.data(), dim);
    g.setZero();
    double loss = 0;
    for (const auto i : batch) {
      const auto a = shard_.A.col(static_cast<Eigen::Index>(i));
      const double r = a.dot(x_) - shard_.b(static_cast<Eigen::Index>(i));
      g.noalias() += r * a;
      loss += 0.5 * r * r;
    }
    g /= static_cast<double>(batch.size());
    return loss / static_cast<double>(batch.size());
  }

 private:
  Shard shard_;
  Eigen::VectorXd x_;
};
}  // namespace

int main(int argc, char** argv) {
  example::Args defaults;
  defaults.learning_rate = 1.0;
  defaults.batch = 2048;
  defaults.epochs = 10;
  example::Cli options(
      "Least squares on synthetic data: distance to the closed-form optimum and round times of each algorithm.",
      defaults);
  options.app().add_option("--dim", dim, "model dimension")
      ->type_name("D")->capture_default_str()->check(cli::whole(1, 1u << 26))->group("Least squares");
  options.app().add_option("--samples", samples_per_worker, "samples per worker")
      ->type_name("S")->capture_default_str()->check(cli::whole(1, 1u << 26))->group("Least squares");
  const auto args = options.parse(argc, argv);

  // The closed-form optimum of the global problem, (sum_w A_w A_w^T) x = sum_w A_w b_w, on rank 0
  // after training; skipped (NaN) when the Gram matrix would be too large to form quickly.
  auto distance_to_optimum = [&](const Eigen::VectorXd& x, int workers) {
    if (dim > 2048) return std::nan("");
    Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(dim, dim);
    Eigen::VectorXd rhs = Eigen::VectorXd::Zero(dim);
    for (int w = 0; w < workers; ++w) {
      const auto s = make_shard(args.seed, w);
      gram.selfadjointView<Eigen::Lower>().rankUpdate(s.A);
      rhs += s.A * s.b;
    }
    const Eigen::VectorXd optimum = gram.selfadjointView<Eigen::Lower>().ldlt().solve(rhs);
    return (x - optimum).norm() / optimum.norm();
  };
  int workers = 1;
  return example::compare(argc, argv, args, static_cast<std::size_t>(dim),
      [&](int rank, int n) {
        workers = n;
        return LeastSquares(make_shard(args.seed, rank));
      },
      [&](const LeastSquares& m) {
        return std::vector<std::pair<std::string, double>>{
            {"rel_dist_to_opt", distance_to_optimum(m.parameters(), workers)}};
      });
}
