// Must not compile: num_samples() is not const.
#include <cocod.hpp>

#include <vector>

struct MutableCount {
  std::vector<float> x;
  std::span<float> parameters() { return x; }
#ifdef COCOD_FAILTEST_OK
  std::size_t num_samples() const { return 1; }
#else
  std::size_t num_samples() { return 1; }
#endif
  double loss_and_gradient(std::span<const std::size_t>, std::span<float>) { return 0; }
};

int main() {
  MutableCount model{std::vector<float>(3)};
  cocod::LocalSGD<MutableCount, cocod::comm::Local> opt{cocod::comm::Local{}, {}};
  (void)opt.optimize(model, cocod::Steps{1});
}
