// A small language model trained the DiLoCo way: a decoder-only transformer over bytes (0.2M
// parameters at the default sizes, 0.86M with --width 128 --layers 4; libtorch) on the fortune
// files of Debian's `fortunes` package, driven by cocod through cocod::torch::ModuleModel, with AdamW
// as each worker's update (the gradient clipped to a global norm, a linear warm-up, then a
// cosine) and, for Local-SGD and CoCoD-SGD with +outer, Nesterov outside. Validation loss and
// perplexity on the curve.
//
//   torch_lm --algo ssgd,local+outer,cocod+dauto+outer --workers 4 --epochs 0.3
//   torch_lm --workers 4 --group-size 2 --bandwidth 0.01   # 2 groups of 2 ranks
//   torch_lm --bandwidth 0.01 --algo local+outer,diloco-delayed --period 32
//   mpiexec -n 4 torch_lm --comm mpi
#include <cocod.hpp>
#include <cocod/torch.hpp>

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "compare.hpp"
#include "corpus.hpp"
#include "tiny_lm.hpp"

int main(int argc, char** argv) {
  example::Args defaults;
  defaults.algorithms = {"ssgd", "local+outer", "cocod+dauto+outer"};
  defaults.learning_rate = 2e-3;
  defaults.cosine = true;
  defaults.warmup_steps = 50;
  defaults.batch = 8;
  defaults.epochs = 0.3;
  defaults.period = 16;
  defaults.curve_every = 0.02;
  example::Cli options("A byte-level transformer on Debian's fortunes: validation loss and perplexity of each algorithm, "
                       "with AdamW inside.", defaults);
  const std::string debian_fortunes = "/usr/share/games/fortunes";
  std::string data = debian_fortunes;
  lm::Shape shape;
  double beta1 = 0.9, beta2 = 0.95, weight_decay = 0.1, clip = 1.0, validation_share = 0.05;
  std::int64_t eval_samples = 128;
  int torch_threads = 1;
  const char* g = "Language model (libtorch)";
  auto& app = options.app();
  app.remove_option(app.get_option("--momentum"));  // AdamW's moments instead: --beta1, --beta2
  app.add_option("--data", data, "the folder of text files (Debian: apt-get install fortunes)")
      ->type_name("DIR")->capture_default_str()->group(g);
  app.add_option("--context", shape.context, "bytes each sample sees")
      ->type_name("T")->capture_default_str()->check(cli::whole(2, 4096))->group(g);
  app.add_option("--width", shape.width, "the model's dimension (a multiple of --heads)")
      ->type_name("D")->capture_default_str()->check(cli::whole(4, 4096))->group(g);
  app.add_option("--layers", shape.layers, "transformer blocks")->type_name("L")->capture_default_str()
      ->check(cli::whole(1, 64))->group(g);
  app.add_option("--heads", shape.heads, "attention heads")->type_name("H")->capture_default_str()
      ->check(cli::whole(1, 64))->group(g);
  app.add_option("--beta1", beta1, "AdamW's first-moment decay, in [0, 1)")
      ->type_name("B")->capture_default_str()->check(cli::real(0, 1, false, true))->group(g);
  app.add_option("--beta2", beta2, "AdamW's second-moment decay, in [0, 1)")
      ->type_name("B")->capture_default_str()->check(cli::real(0, 1, false, true))->group(g);
  app.add_option("--weight-decay", weight_decay, "AdamW's decoupled weight decay")
      ->type_name("WD")->capture_default_str()->check(cli::real(0, 1e6))->group(g);
  app.add_option("--clip-grad-norm", clip, "the largest global norm of a worker's gradient")
      ->type_name("N")->capture_default_str()->check(cli::positive(1e9))->group(g);
  app.add_option("--validation-share", validation_share, "the last share of each file kept for validation")
      ->type_name("S")->capture_default_str()->check(cli::real(0, 1, true, true))->group(g);
  app.add_option("--eval-samples", eval_samples, "validation samples each curve point is measured on")
      ->type_name("N")->capture_default_str()->check(cli::whole(1, 1ull << 30))->group(g);
  app.add_option("--torch-threads", torch_threads,
                 "libtorch's intra-op threads, shared by the workers of this process (torch::set_num_threads)")
      ->type_name("N")->capture_default_str()->check(CLI::PositiveNumber)->group(g);
  example::Args args = options.parse(argc, argv);
  if (shape.width % shape.heads != 0) cli::refuse(argv[0], "--width " + std::to_string(shape.width) +
                                                                " is not a multiple of --heads " + std::to_string(shape.heads));
  torch::set_num_threads(torch_threads);

  std::string error;
  const auto corpus = lm::read_corpus(data, validation_share, error);
  if (!corpus)  // a folder without the text: a usage error, before anything is trained
    cli::refuse(argv[0], "--data: " + error +
                             (data == debian_fortunes ? " (Debian's fortunes package installs them: apt-get install fortunes)" : ""));
  const std::int64_t validation_all = (static_cast<std::int64_t>(corpus->validation.size()) - 1) / shape.context;
  if (validation_all < 1) {
    std::fprintf(stderr, "%s: --validation-share: the validation text holds no sample of %lld bytes\n", argv[0],
                 static_cast<long long>(shape.context + 1));
    return 2;
  }
  const lm::Samples validation =
      lm::cut(corpus->validation, shape.context, 0, std::max<std::int64_t>(1, validation_all / eval_samples), eval_samples);
  std::size_t parameters = 0;
  for (const auto& p : lm::make(shape, args.seed)->parameters()) parameters += static_cast<std::size_t>(p.numel());
  std::printf("# corpus: %zu files of %s, %zu bytes to train on, %zu to validate (%lld samples of %lld bytes measured)\n",
              corpus->files.size(), data.c_str(), corpus->train.size(), corpus->validation.size(),
              static_cast<long long>(validation.inputs.size(0)), static_cast<long long>(shape.context));

  using Inner = cocod::update::ClipGradNorm<cocod::update::AdamW>;
  const Inner adamw{.max_norm = clip, .inner = {.beta1 = beta1, .beta2 = beta2, .weight_decay = weight_decay}};
  return example::compare(argc, argv, args, parameters,
      [&](int rank, int workers) {  // every workers-th sample from the rank-th: each worker sees every file
        const lm::Samples mine = lm::cut(corpus->train, shape.context, rank, workers);
        return cocod::torch::make_model(lm::make(shape, args.seed), mine.inputs, mine.targets, lm::next_byte_loss);
      },
      [&](auto& m) {
        torch::NoGradGuard no_grad;
        m.net()->eval();
        const double loss = lm::next_byte_loss(m.net()->forward(validation.inputs), validation.targets).template item<double>();
        m.net()->train();
        return std::vector<std::pair<std::string, double>>{{"val_loss", loss}, {"perplexity", std::exp(loss)}};
      },
      adamw);
}
