// Two workers (threads of this process) fit a line y = a x + b with CoCoD-SGD.
#include <cocod.hpp>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

// A model is any type with these three members (docs/guide.md).
struct Line {
  std::vector<double> ab{0.0, 0.0};  // the parameters a and b, updated in place by cocod
  std::vector<double> xs, ys;        // this worker's shard of the data

  std::vector<double>& parameters() { return ab; }
  std::size_t num_samples() const { return xs.size(); }
  // The gradient of the mean squared error over the batch; returns that mean loss.
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<double> gradient) {
    double loss = 0.0;
    gradient[0] = gradient[1] = 0.0;
    for (std::size_t i : batch) {
      const double r = ab[0] * xs[i] + ab[1] - ys[i];
      loss += 0.5 * r * r;
      gradient[0] += r * xs[i];
      gradient[1] += r;
    }
    const double n = static_cast<double>(batch.size());
    gradient[0] /= n;
    gradient[1] /= n;
    return loss / n;
  }
};

int main() {
  std::atomic<int> failures = 0;
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Line model;
    for (int i = 0; i < 256; ++i) {  // worker r holds the points with x in [r, r + 1)
      const double x = comm.rank() + i / 256.0;
      model.xs.push_back(x);
      model.ys.push_back(2.0 * x + 1.0);
    }
    cocod::CoCoDSGD<Line, cocod::comm::Threads> opt{
        comm, {.learning_rate = 0.05, .period = 4, .batch_size = 16}, cocod::update::Sgd{.momentum = 0.9}};
    cocod::Report report = opt.optimize(model, cocod::Epochs{20});
    // Every worker now holds the same consensus model.
    if (comm.rank() == 0) {
      std::printf("y = %.4f x + %.4f after %zu steps (expected y = 2 x + 1)\n", model.ab[0], model.ab[1],
                  report.steps);
      std::printf("model digest: %s\n", cocod::model_digest(model).c_str());  // compare runs bit for bit
    }
    if (std::abs(model.ab[0] - 2.0) > 1e-3 || std::abs(model.ab[1] - 1.0) > 1e-3) ++failures;
  });
  return failures == 0 ? 0 : 1;
}
