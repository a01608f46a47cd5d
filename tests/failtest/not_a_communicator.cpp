// Must not compile: the communicator type lacks the collectives.
#include <cocod.hpp>

#include <vector>

struct Tiny {
  std::vector<double> x = std::vector<double>(2);
  std::span<double> parameters() { return x; }
  std::size_t num_samples() const { return 1; }
  double loss_and_gradient(std::span<const std::size_t>, std::span<double>) { return 0; }
};

#ifdef COCOD_FAILTEST_OK
using Comm = cocod::comm::Local;
#else
struct Comm {  // rank and size, but no collectives
  int rank() const { return 0; }
  int size() const { return 1; }
};
#endif

int main() {
  Tiny model;
  cocod::PipeSGD<Tiny, Comm> opt{Comm{}, {}};
  (void)opt.optimize(model, cocod::Epochs{1});
}
