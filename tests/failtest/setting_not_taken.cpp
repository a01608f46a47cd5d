// Must not compile: S-SGD is given an outer optimizer, a setting only the model-averaging
// algorithms take.
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
#ifdef COCOD_FAILTEST_OK
  cocod::LocalSGD<Tiny, cocod::comm::Local> opt{cocod::comm::Local{}, {}, cocod::Outer::diloco()};
#else
  cocod::SyncSGD<Tiny, cocod::comm::Local> opt{cocod::comm::Local{}, {}, cocod::Outer::diloco()};
#endif
  (void)opt.optimize(model, cocod::Steps{3});
}
