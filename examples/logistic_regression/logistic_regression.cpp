// Logistic regression on data drawn from a known model w*: labels y = sign(a . w* + noise).
// Reports held-out accuracy next to the accuracy of w* itself (the best attainable), and the
// cosine between the learned weights and w*.
//
//   logistic_regression --algo all --workers 2 --period 8
//   mpiexec -n 4 logistic_regression --comm mpi
#include <Eigen/Dense>

#include <cocod.hpp>

#include <cmath>

#include "compare.hpp"

namespace {
constexpr Eigen::Index dim = 128;
constexpr std::size_t samples_per_worker = 8192;
constexpr std::size_t test_samples = 20000;

struct Data {
  Eigen::MatrixXd A;  // one sample per column
  Eigen::VectorXd y;  // +1 / -1
};
Eigen::VectorXd truth(std::uint64_t seed) {
  cocod::Rng rng(seed + 17);
  Eigen::VectorXd w(dim);
  for (auto& v : w) v = rng.uniform() * 2 - 1;
  return w * (4.0 / w.norm());
}
Data make_data(std::uint64_t seed, std::uint64_t stream, std::size_t n) {
  const Eigen::VectorXd w = truth(seed);
  cocod::Rng rng(seed * 7919 + stream);
  Data d{Eigen::MatrixXd(dim, static_cast<Eigen::Index>(n)), Eigen::VectorXd(static_cast<Eigen::Index>(n))};
  for (Eigen::Index j = 0; j < d.A.cols(); ++j) {
    for (Eigen::Index i = 0; i < dim; ++i) d.A(i, j) = (rng.uniform() * 2 - 1) * std::sqrt(3.0);  // unit variance
    // logistic label noise: P(y = 1) = sigmoid(a . w*)
    const double p = 1.0 / (1.0 + std::exp(-d.A.col(j).dot(w)));
    d.y(j) = rng.uniform() < p ? 1.0 : -1.0;
  }
  return d;
}
double accuracy(const Eigen::VectorXd& w, const Data& d) {
  std::size_t right = 0;
  for (Eigen::Index j = 0; j < d.A.cols(); ++j) right += (d.A.col(j).dot(w) >= 0) == (d.y(j) > 0);
  return static_cast<double>(right) / static_cast<double>(d.A.cols());
}

class Logistic {
 public:
  explicit Logistic(Data data) : data_(std::move(data)), w_(Eigen::VectorXd::Zero(dim)) {}
  Eigen::VectorXd& parameters() { return w_; }
  const Eigen::VectorXd& parameters() const { return w_; }
  std::size_t num_samples() const { return static_cast<std::size_t>(data_.A.cols()); }
  /// mean log(1 + exp(-y a.w)) and its gradient
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<double> gradient) {
    Eigen::Map<Eigen::VectorXd> g(gradient.data(), dim);
    g.setZero();
    double loss = 0;
    for (const auto i : batch) {
      const auto a = data_.A.col(static_cast<Eigen::Index>(i));
      const double y = data_.y(static_cast<Eigen::Index>(i));
      const double z = y * a.dot(w_);
      loss += z > 0 ? std::log1p(std::exp(-z)) : -z + std::log1p(std::exp(z));
      g.noalias() += (-y / (1.0 + std::exp(z))) * a;
    }
    g /= static_cast<double>(batch.size());
    return loss / static_cast<double>(batch.size());
  }

 private:
  Data data_;
  Eigen::VectorXd w_;
};
}  // namespace

int main(int argc, char** argv) {
  example::Args defaults;
  defaults.learning_rate = 0.5;
  defaults.batch = 256;
  defaults.epochs = 3;
  example::Cli options(
      "Logistic regression on data from a known model: held-out accuracy against the true model's, per algorithm.",
      defaults);
  const auto args = options.parse(argc, argv);
  const Data test = make_data(args.seed, 1u << 30, test_samples);
  const Eigen::VectorXd w_star = truth(args.seed);
  const double best = accuracy(w_star, test);
  return example::compare(argc, argv, args, dim,
      [&](int rank, int) { return Logistic(make_data(args.seed, static_cast<std::uint64_t>(rank), samples_per_worker)); },
      [&](const Logistic& m) {
        const auto& w = m.parameters();
        return std::vector<std::pair<std::string, double>>{
            {"test_accuracy", accuracy(w, test)},
            {"true_w_accuracy", best},
            {"cos_to_true_w", w.dot(w_star) / (w.norm() * w_star.norm() + 1e-300)}};
      });
}
