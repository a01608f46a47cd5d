// Fashion-MNIST (real data, from Debian's dataset-fashion-mnist): an MLP (784-256-128-10) or
// multinomial logistic regression, trained by each algorithm on its own shard per worker; test
// accuracy, training loss and round times.
//
//   fashion_mnist --model mlp --algo all --workers 4 --epochs 12
//   fashion_mnist --algo cocod --slowdown 3:3 --sampling equal,proportional --trace trace.json
//   fashion_mnist --model logreg --non-iid
//   mpiexec -n 2 fashion_mnist --comm mpi
#include <cocod.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "compare.hpp"
#include "idx.hpp"
#include "models.hpp"

int main(int argc, char** argv) {
  std::string model = "mlp", data = "/usr/share/datasets/fashion-mnist";
  bool non_iid = false;
  // Options of this example, taken out before the common ones are parsed.
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--data" && i + 1 < argc) {
      data = argv[++i];
    } else if (a == "--non-iid") {
      non_iid = true;
    } else {
      if (a == "--help" || a == "-h")
        std::printf("Example options: --model mlp|logreg (default mlp), --data DIR (default %s),\n"
                    "  --non-iid (each worker mostly sees a few classes)\n\n", data.c_str());
      rest.push_back(argv[i]);
    }
  }
  if (model != "mlp" && model != "logreg") example::usage_error(argv[0], "unknown model '" + model + "' (mlp or logreg)");
  int rest_argc = static_cast<int>(rest.size());
  char** rest_argv = rest.data();

  example::Args defaults;  // the demo's settings: every algorithm reaches the quality bar with them
  defaults.learning_rate = model == "mlp" ? 0.02 : 0.05;
  defaults.momentum = 0.9;
  defaults.cosine = true;
  defaults.batch = 64;
  defaults.epochs = 12;
  defaults.auto_period = true;
  const auto args = example::parse(rest_argc, rest_argv,
      "Fashion-MNIST: test accuracy, training loss and round times of each algorithm.", defaults);

  idx::Dataset train, test;
  try {
    train = idx::load(data + "/train-images-idx3-ubyte.gz", data + "/train-labels-idx1-ubyte.gz");
    test = idx::load(data + "/t10k-images-idx3-ubyte.gz", data + "/t10k-labels-idx1-ubyte.gz");
  } catch (const idx::Error& e) {
    std::fprintf(stderr, "%s: %s\n(Debian: apt-get install dataset-fashion-mnist)\n", argv[0], e.what());
    return 1;
  }
  std::vector<std::size_t> all(test.count);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  const fmnist::Scaling scaling = fmnist::standardize(train);  // the training set's statistics, for both sets
  const fmnist::Shard test_set = fmnist::to_shard(test, all, scaling);
  const auto sizes = model == "mlp" ? fmnist::mlp_sizes() : fmnist::logistic_sizes();
  std::size_t parameters = 0;
  for (std::size_t l = 0; l + 1 < sizes.size(); ++l) parameters += static_cast<std::size_t>(sizes[l + 1]) * (sizes[l] + 1);

  return example::compare(rest_argc, rest_argv, args, parameters,
      [&](int rank, int workers) { return fmnist::Network(fmnist::shard(train, rank, workers, non_iid, args.seed, scaling), sizes, args.seed); },
      [&](fmnist::Network& net) {
        return std::vector<std::pair<std::string, double>>{{"test_accuracy", net.accuracy(test_set)}};
      });
}
