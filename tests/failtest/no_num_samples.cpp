// Must not compile: no num_samples().
#include <cocod.hpp>

#include <vector>

struct NoSamples {
  std::vector<float> x;
  std::span<float> parameters() { return x; }
#ifdef COCOD_FAILTEST_OK
  std::size_t num_samples() const { return 1; }
#endif
  double loss_and_gradient(std::span<const std::size_t>, std::span<float>) { return 0; }
};

int main() {
  cocod::SyncSGD<NoSamples, cocod::comm::Local> opt{cocod::comm::Local{}, {}};
  (void)opt;
}
