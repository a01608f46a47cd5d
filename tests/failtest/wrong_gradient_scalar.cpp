// Must not compile: the gradient span has another scalar than the parameters.
#include <cocod.hpp>

#include <vector>

struct FloatGradient {
  std::vector<double> x;
  std::span<double> parameters() { return x; }
  std::size_t num_samples() const { return 1; }
#ifdef COCOD_FAILTEST_OK
  double loss_and_gradient(std::span<const std::size_t>, std::span<double>) { return 0; }
#else
  double loss_and_gradient(std::span<const std::size_t>, std::span<float>) { return 0; }
#endif
};

int main() {
  FloatGradient model{std::vector<double>(3)};
  cocod::Optimizer<FloatGradient, cocod::comm::Local> opt{cocod::comm::Local{}, {}};
  (void)opt.optimize(model, cocod::Steps{1});
}
