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
#include <string>
#include <vector>

#include "compare.hpp"
#include "data.hpp"
#include "idx.hpp"
#include "models.hpp"

int main(int argc, char** argv) {
  example::Args defaults;  // the demo's settings: every algorithm reaches the quality bar with them
  defaults.learning_rate = 0.02;  // 0.05 for logreg, below
  defaults.momentum = 0.9;
  defaults.cosine = true;
  defaults.batch = 64;
  defaults.epochs = 12;
  defaults.auto_period = true;
  example::Cli options("Fashion-MNIST: test accuracy, training loss and round times of each algorithm.", defaults);
  std::string model = "mlp", data = fmnist::debian_data;
  bool non_iid = false;
  const char* g = "Fashion-MNIST";
  options.app().add_option("--model", model, "mlp (784-256-128-10) or logreg (multinomial logistic regression)")
      ->type_name("mlp|logreg")->capture_default_str()->check(cli::one_of({"mlp", "logreg"}))->group(g);
  options.app().add_option("--data", data, "the directory of the gzipped IDX files")
      ->type_name("DIR")->capture_default_str()->group(g);
  options.app().add_flag("--non-iid", non_iid, "each worker mostly sees a few classes")->group(g);
  options.app().get_option("--lr")->default_str("0.02 (mlp), 0.05 (logreg)");
  example::Args args = options.parse(argc, argv);
  fmnist::require_data(data, args.program);
  if (model == "logreg" && !options.given("--lr")) args.learning_rate = 0.05;

  const auto sets = fmnist::load_sets(data, argv[0]);
  if (!sets) return 1;
  const idx::Dataset &train = sets->first, &test = sets->second;
  const fmnist::Scaling scaling = fmnist::standardize(train);  // the training set's statistics, for both sets
  const fmnist::Shard test_set = fmnist::to_shard(test, fmnist::every_sample(test), scaling);
  const auto sizes = model == "mlp" ? fmnist::mlp_sizes() : fmnist::logistic_sizes();
  std::size_t parameters = 0;
  for (std::size_t l = 0; l + 1 < sizes.size(); ++l) parameters += static_cast<std::size_t>(sizes[l + 1]) * (sizes[l] + 1);

  return example::compare(argc, argv, args, parameters,
      [&](int rank, int workers) { return fmnist::Network(fmnist::shard(train, rank, workers, non_iid, args.seed, scaling), sizes, args.seed); },
      [&](fmnist::Network& net) {
        return std::vector<std::pair<std::string, double>>{{"test_accuracy", net.accuracy(test_set)}};
      });
}
