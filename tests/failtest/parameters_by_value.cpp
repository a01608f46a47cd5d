// Must not compile: parameters() returns an owning copy, which cocod would update in vain.
#include <cocod.hpp>

#include <vector>

struct CopiesParameters {
  std::vector<double> x;
#ifdef COCOD_FAILTEST_OK
  std::vector<double>& parameters() { return x; }
#else
  std::vector<double> parameters() { return x; }
#endif
  std::size_t num_samples() const { return 1; }
  double loss_and_gradient(std::span<const std::size_t>, std::span<double>) { return 0; }
};

int main() {
  cocod::LocalSGD<CopiesParameters, cocod::comm::Local> opt{cocod::comm::Local{}, {}};
  (void)opt;
}
