// Fashion-MNIST with libtorch networks: a small CNN or the MLP, written with torch::nn and
// trained by each algorithm through cocod::torch::ModuleModel (the module's own parameters, no
// copy per step). The same flags as the fashion_mnist example.
//
//   torch_fashion_mnist --model cnn --algo all --workers 4
//   torch_fashion_mnist --model mlp --algo cocod,ssgd --torch-threads 1
//   mpiexec -n 2 torch_fashion_mnist --comm mpi
//   torch_fashion_mnist --model cnn --save-init cnn.f32   (the initial weights, for another framework)
#include <cocod.hpp>
#include <cocod/torch.hpp>

#include <torch/torch.h>

#include <cstdio>
#include <string>
#include <vector>

#include "compare.hpp"
#include "data.hpp"
#include "idx.hpp"
#include "models.hpp"
#include "nets.hpp"

namespace {

/// Samples as rows of a tensor in the network's shape, and their labels.
struct Tensors {
  torch::Tensor inputs, targets;
};
Tensors to_tensors(const fmnist::Shard& s, const std::string& model) {
  std::vector<std::int64_t> shape{static_cast<std::int64_t>(s.size())};
  for (std::int64_t d : nets::sample_shape(model)) shape.push_back(d);
  // The shard's matrix holds one sample per column, column-major: row-major samples x pixels.
  torch::Tensor inputs = torch::from_blob(const_cast<float*>(s.x.data()), shape, torch::kFloat).clone();
  std::vector<std::int64_t> labels(s.y.begin(), s.y.end());
  return {inputs, torch::tensor(labels, torch::kLong)};
}

auto cross_entropy = [](const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits, labels);
};

}  // namespace

int main(int argc, char** argv) {
  example::Args defaults;  // every algorithm reaches the quality bar with these
  defaults.learning_rate = 0.02;
  defaults.momentum = 0.9;
  defaults.cosine = true;
  defaults.batch = 64;
  defaults.epochs = 12;
  defaults.auto_period = true;
  example::Cli options("Fashion-MNIST with libtorch networks: test accuracy, training loss and round times of each "
                       "algorithm.", defaults);
  std::string model = "cnn", data = fmnist::debian_data;
  bool non_iid = false;
  int torch_threads = 1;
  std::string save_init;
  const char* g = "Fashion-MNIST (libtorch)";
  options.app().add_option("--model", model, "cnn (two convolutions, pooling, two linear layers) or mlp (784-256-128-10)")
      ->type_name("cnn|mlp")->capture_default_str()->check(cli::one_of({"cnn", "mlp"}))->group(g);
  options.app().add_option("--data", data, "the directory of the gzipped IDX files")
      ->type_name("DIR")->capture_default_str()->group(g);
  options.app().add_flag("--non-iid", non_iid, "each worker mostly sees a few classes")->group(g);
  options.app().add_option("--torch-threads", torch_threads,
                           "libtorch's intra-op threads, shared by the workers of this process (torch::set_num_threads)")
      ->type_name("N")->capture_default_str()->check(CLI::PositiveNumber)->group(g);
  options.app().add_option("--save-init", save_init,
                           "write the network's initial parameters (float32, in its parameter order) to FILE and "
                           "exit, so that another framework can start from the same weights")
      ->type_name("FILE")->check(cli::writable_file())->group(g);
  example::Args args = options.parse(argc, argv);
  torch::set_num_threads(torch_threads);
  if (!save_init.empty()) {
    std::FILE* f = std::fopen(save_init.c_str(), "wb");
    if (!f) {
      cli::refuse(argv[0], "--save-init: cannot write " + save_init);
    }
    std::size_t written = 0, count = 0;
    for (const auto& p : nets::make(model, args.seed)->parameters()) {
      const torch::Tensor c = p.detach().contiguous();
      written += std::fwrite(c.data_ptr<float>(), sizeof(float), static_cast<std::size_t>(c.numel()), f);
      count += static_cast<std::size_t>(c.numel());
    }
    if (std::fclose(f) != 0 || written != count) {
      std::fprintf(stderr, "--save-init: writing %s failed\n", save_init.c_str());
      return 1;
    }
    std::printf("# %s: %zu initial parameters of the %s (seed %llu)\n", save_init.c_str(), count, model.c_str(),
                static_cast<unsigned long long>(args.seed));
    return 0;
  }

  fmnist::require_data(data, args.program);
  const auto sets = fmnist::load_sets(data, argv[0]);
  if (!sets) return 1;
  const idx::Dataset &train = sets->first, &test = sets->second;
  const fmnist::Scaling scaling = fmnist::standardize(train);  // the training set's statistics, for both sets
  const Tensors test_set = to_tensors(fmnist::to_shard(test, fmnist::every_sample(test), scaling), model);
  std::size_t parameters = 0;
  for (const auto& p : nets::make(model, args.seed)->parameters()) parameters += static_cast<std::size_t>(p.numel());

  return example::compare(argc, argv, args, parameters,
      [&](int rank, int workers) {
        const Tensors mine = to_tensors(fmnist::shard(train, rank, workers, non_iid, args.seed, scaling), model);
        return cocod::torch::make_model(nets::make(model, args.seed), mine.inputs, mine.targets, cross_entropy);
      },
      [&](auto& m) {
        torch::NoGradGuard no_grad;
        m.net()->eval();
        const torch::Tensor predicted = m.net()->forward(test_set.inputs).argmax(1);
        const double accuracy = predicted.eq(test_set.targets).to(torch::kDouble).mean().template item<double>();
        return std::vector<std::pair<std::string, double>>{{"test_accuracy", accuracy}};
      });
}
