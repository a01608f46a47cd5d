// Must not compile: the type has parameters and a sample count but no loss_and_gradient.
#include <cocod.hpp>

#include <vector>

struct NotAModel {
  std::vector<double> x;
  std::vector<double>& parameters() { return x; }
  std::size_t num_samples() const { return 1; }
#ifdef COCOD_FAILTEST_OK
  double loss_and_gradient(std::span<const std::size_t>, std::span<double>) { return 0; }
#endif
};

int main() {
  cocod::Optimizer<NotAModel, cocod::comm::Local> opt{cocod::comm::Local{}, {}};
  (void)opt;
}
