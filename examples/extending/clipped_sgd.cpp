// A new local update rule: SGD with each gradient element clipped to [-c, c], on the CPU
// backend. With a clip no gradient reaches it is plain SGD bit for bit; with a small one every
// step moves each parameter by at most lr * c; a clip of 0 is refused, naming the field.
#include <cocod.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "clipped_sgd.hpp"

struct Line {  // f(x) = mean_i 0.5 (x - 100 i)^2: far from the optimum, gradients are large
  std::vector<double> x = std::vector<double>(3, 0.0);
  std::span<double> parameters() { return x; }
  std::size_t num_samples() const { return 10; }
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<double> g) {
    std::fill(g.begin(), g.end(), 0.0);
    double loss = 0.0;
    for (auto i : batch)
      for (std::size_t d = 0; d < x.size(); ++d) {
        const double r = x[d] - 100.0 * static_cast<double>(i);
        g[d] += r / static_cast<double>(batch.size());
        loss += 0.5 * r * r;
      }
    return loss / static_cast<double>(batch.size());
  }
};

template <class Update>
std::vector<double> train(Update update, std::size_t steps) {
  Line model;
  using Schedule = cocod::schedule::Fixed<>;
  cocod::LocalSGD<Line, cocod::comm::Local, Schedule, Update> opt{cocod::comm::Local{}, {.learning_rate = 0.1, .batch_size = 2},
                                                                  update};
  (void)opt.optimize(model, cocod::Steps{steps});
  return model.x;
}

int main() {
  const auto plain = train(cocod::update::Sgd{}, 20);
  const auto wide = train(ClippedSgd{.clip = 1e9}, 20);
  const auto tight = train(ClippedSgd{.clip = 0.5}, 20);
  const bool same = plain == wide;
  const bool bounded = std::all_of(tight.begin(), tight.end(), [](double v) { return std::abs(v) <= 20 * 0.1 * 0.5 + 1e-12; });
  std::printf("clip 1e9: %s plain SGD bit for bit (x[0] = %.6f)\n", same ? "equals" : "DIFFERS FROM", wide[0]);
  std::printf("clip 0.5: x[0] = %.6f, within 20 steps x lr x clip = 1: %s\n", tight[0], bounded ? "yes" : "NO");
  std::string refused;
  try {
    (void)train(ClippedSgd{.clip = 0.0}, 1);
  } catch (const std::invalid_argument& e) {
    refused = e.what();
  }
  std::printf("clip 0: %s\n", refused.empty() ? "ACCEPTED" : refused.c_str());
  return same && bounded && !refused.empty() ? 0 : 1;
}
