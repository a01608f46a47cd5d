// Must not compile: optimize() is told a plain number instead of Epochs, Steps or Rounds.
#include <cocod.hpp>

#include <vector>

struct Tiny {
  std::vector<double> x = std::vector<double>(2);
  std::span<double> parameters() { return x; }
  std::size_t num_samples() const { return 1; }
  double loss_and_gradient(std::span<const std::size_t>, std::span<double>) { return 0; }
};

int main() {
  Tiny model;
  cocod::Optimizer<Tiny, cocod::comm::Local> opt{cocod::comm::Local{}, {}};
#ifdef COCOD_FAILTEST_OK
  (void)opt.optimize(model, cocod::Epochs{3});
#else
  (void)opt.optimize(model, 3);
#endif
}
