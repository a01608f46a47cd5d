// cocod::torch::ModuleModel: a libtorch module as a cocod::Model. Zero copy (the parameters and
// gradients are cocod's memory), one step equal to torch::optim::SGD's, buffers averaged and
// checkpointed, a run whose loss falls, and the modules it refuses.
// libtorch first: it brings glog, whose CHECK macros would otherwise replace doctest's.
#include <torch/torch.h>
#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LE
#undef CHECK_LT
#undef CHECK_GE
#undef CHECK_GT
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/checkpoint.hpp>
#include <cocod/torch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

namespace {

namespace F = torch::nn::functional;

// A synthetic classification shard: 3 classes of Gaussian blobs in 8 dimensions.
struct Shard {
  torch::Tensor inputs, targets;
};
Shard shard(std::int64_t n, std::uint64_t seed) {
  torch::manual_seed(seed);
  torch::Tensor targets = torch::randint(0, 3, {n}, torch::kLong);
  torch::Tensor centres = torch::randn({3, 8}) * 2.0;
  torch::Tensor inputs = centres.index_select(0, targets) + torch::randn({n, 8});
  return {inputs, targets};
}

torch::nn::Sequential mlp(std::uint64_t seed) {
  torch::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::ReLU(), torch::nn::Linear(16, 3));
}

auto cross_entropy = [](const torch::Tensor& out, const torch::Tensor& y) { return F::cross_entropy(out, y); };
using Loss = decltype(cross_entropy);

// A module of the user's own: submodules, a BatchNorm (float running statistics and an integer
// counter) and a parameter of its own.
struct NetImpl : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d norm{nullptr};
  torch::Tensor scale;
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    norm = register_module("norm", torch::nn::BatchNorm1d(16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 3));
    scale = register_parameter("scale", torch::ones({1}));
  }
  torch::Tensor forward(torch::Tensor x) {
    if (forwards++ == poison_at) {  // a NaN in the running mean, before this forward builds its graph
      torch::NoGradGuard no_grad;
      norm->running_mean[0] = std::numeric_limits<float>::quiet_NaN();
    }
    return fc2(torch::relu(norm(fc1(x)))) * scale;
  }
  int forwards = 0, poison_at = -1;
};
TORCH_MODULE(Net);

// This worker's shard and a fresh BatchNorm module, built under `m`: libtorch's generator is the
// process's, shared by the workers of comm::Threads.
std::pair<Shard, Net> shard_and_net(std::mutex& m, std::int64_t n, std::uint64_t shard_seed, std::uint64_t net_seed) {
  std::lock_guard lock(m);
  Shard data = shard(n, shard_seed);
  torch::manual_seed(net_seed);
  return {data, Net()};
}

// |a - b| in units of the last place of `scale`, the largest magnitude among the operands and
// the results: a fused multiply-add and a multiply then add differ by at most one such unit.
double ulps(float a, float b, float scale) {
  const float s = std::max({std::abs(scale), std::abs(a), std::abs(b), std::numeric_limits<float>::min()});
  return std::abs(static_cast<double>(a) - static_cast<double>(b)) / (std::nextafter(s, INFINITY) - s);
}

}  // namespace

static_assert(cocod::Model<cocod::torch::ModuleModel<torch::nn::Sequential, Loss>>);
static_assert(cocod::BufferedModel<cocod::torch::ModuleModel<Net, Loss>>);
static_assert(cocod::StatefulModel<cocod::torch::ModuleModel<Net, Loss>>);

TEST_CASE("the module's parameters are views into the buffer cocod updates (no copy)") {
  auto data = shard(64, 1);
  auto net = mlp(2);
  auto model = cocod::torch::make_model(net, data.inputs, data.targets, cross_entropy);
  const std::span<float> x = model.parameters();
  CHECK(x.size() == 8 * 16 + 16 + 16 * 3 + 3);
  const auto layout = model.layout();
  REQUIRE(layout.size() == 4);
  CHECK(layout[0].first == "0.weight");
  std::size_t i = 0;
  for (const auto& p : net->parameters()) {
    CHECK(p.data_ptr<float>() == x.data() + layout[i].second);
    CHECK(p.is_contiguous());
    ++i;
  }
  x[0] = 42.0f;  // what cocod writes, the module computes with
  CHECK(net->parameters()[0].view({-1})[0].item<float>() == 42.0f);
}

TEST_CASE("flat_parameters() is the one tensor that parameters() spans") {
  auto data = shard(64, 1);
  auto net = mlp(2);
  auto model = cocod::torch::make_model(net, data.inputs, data.targets, cross_entropy);
  const std::span<float> x = model.parameters();
  const torch::Tensor& flat = model.flat_parameters();
  CHECK(flat.data_ptr<float>() == x.data());
  CHECK(static_cast<std::size_t>(flat.numel()) == x.size());
  CHECK(flat.dim() == 1);
}

TEST_CASE("backward() writes the gradient into cocod's buffer in place, equal to a plain backward") {
  auto data = shard(64, 3);
  auto net = mlp(4), reference = mlp(4);
  std::vector<float> g(8 * 16 + 16 + 16 * 3 + 3, 7.0f);  // not zero: the adapter zeroes it
  std::size_t checked = 0;
  auto loss = [&](const torch::Tensor& out, const torch::Tensor& y) {
    // During the step the parameters' .grad() are views of g.
    for (const auto& p : net->parameters()) {
      CHECK(p.grad().defined());
      CHECK(static_cast<float*>(p.grad().data_ptr()) >= g.data());
      CHECK(static_cast<float*>(p.grad().data_ptr()) < g.data() + g.size());
      ++checked;
    }
    return F::cross_entropy(out, y);
  };
  auto model = cocod::torch::make_model(net, data.inputs, data.targets, loss);
  const std::vector<std::size_t> batch{3, 1, 4, 15, 9, 26, 5, 35};
  const double l = model.loss_and_gradient(batch, g);
  CHECK(checked == 4);
  CHECK(model.gradient_copies() == 0);
  for (const auto& p : net->parameters()) CHECK_FALSE(p.grad().defined());  // undefined between steps

  torch::Tensor index = torch::tensor(std::vector<std::int64_t>(batch.begin(), batch.end()));
  torch::Tensor ref_loss = F::cross_entropy(reference->forward(data.inputs.index_select(0, index)),
                                            data.targets.index_select(0, index));
  ref_loss.backward();
  CHECK(l == ref_loss.item<double>());
  std::size_t offset = 0, differ = 0;
  for (const auto& p : reference->parameters()) {
    const torch::Tensor flat = p.grad().contiguous().view({-1});
    for (std::int64_t j = 0; j < flat.numel(); ++j) differ += flat[j].item<float>() != g[offset + static_cast<std::size_t>(j)];
    offset += static_cast<std::size_t>(flat.numel());
  }
  CHECK(differ == 0);  // the same kernels in the same order: bitwise
}

// cocod's update::Sgd evaluates d = g + lambda x; v = mu v + d; x = x - lr (d + mu v) with a
// rounding after every operation, as written. torch::optim::SGD evaluates the same formula with
// add(alpha) and add_(alpha), which its CPU kernels compute as a fused multiply-add (one rounding
// instead of two) where the CPU has FMA. So the two agree to 1 ulp of the largest operand (2 with
// Nesterov, whose d + mu v is a second fused operation in a row), and bitwise wherever the skipped
// rounding is exact. Each step starts both from torch's parameters,
// so that both compute the same gradient; the momentum buffers carry their own rounding on.
TEST_CASE("a step of cocod's update::Sgd equals torch::optim::SGD's to 1 ulp (2 with Nesterov)") {
  struct Setting {
    double momentum, weight_decay;
    bool nesterov;
  };
  for (const Setting s : {Setting{0.0, 0.0, false}, Setting{0.0, 1e-3, false}, Setting{0.9, 0.0, false},
                          Setting{0.9, 5e-4, true}, Setting{0.5, 1e-3, false}}) {
    CAPTURE(s.momentum);
    CAPTURE(s.weight_decay);
    CAPTURE(s.nesterov);
    auto data = shard(96, 5);
    auto net = mlp(6), reference = mlp(6);
    auto model = cocod::torch::make_model(net, data.inputs, data.targets, cross_entropy);
    cocod::SyncSGD<decltype(model), cocod::comm::Local> opt{
        cocod::comm::Local{},
        {.learning_rate = 0.1, .batch_size = 16},
        cocod::update::Sgd{.momentum = s.momentum, .nesterov = s.nesterov, .weight_decay = s.weight_decay}};
    torch::optim::SGD sgd(reference->parameters(), torch::optim::SGDOptions(0.1)
                                                       .momentum(s.momentum)
                                                       .nesterov(s.nesterov)
                                                       .weight_decay(s.weight_decay));
    opt.begin(model, cocod::Steps{3});
    double worst = 0;
    std::size_t equal = 0, total = 0;
    for (int step = 0; step < 3; ++step) {
      const std::span<float> x = model.parameters();
      std::vector<float> before;
      for (const auto& p : reference->parameters()) {  // start from torch's parameters
        const torch::Tensor flat = p.detach().contiguous().view({-1});
        before.insert(before.end(), flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
      }
      std::copy(before.begin(), before.end(), x.begin());
      const auto batch = opt.next_batch();
      torch::Tensor index = torch::tensor(std::vector<std::int64_t>(batch.begin(), batch.end()));
      sgd.zero_grad();
      F::cross_entropy(reference->forward(data.inputs.index_select(0, index)), data.targets.index_select(0, index))
          .backward();
      sgd.step();
      (void)opt.step(model, batch);
      std::size_t offset = 0;
      for (const auto& p : reference->parameters()) {
        const torch::Tensor flat = p.detach().contiguous().view({-1});
        const float* r = flat.data_ptr<float>();
        for (std::int64_t j = 0; j < flat.numel(); ++j, ++offset) {
          worst = std::max(worst, ulps(r[j], x[offset], before[offset]));
          equal += r[j] == x[offset];
          ++total;
        }
      }
    }
    MESSAGE("torch::optim::SGD vs update::Sgd: " << equal << " of " << total << " updated parameters bitwise equal, "
                                                 << "the others within " << worst << " ulp");
    CHECK(worst <= (s.nesterov ? 2.0 : 1.0));
    CHECK(equal > total / 2);
    (void)opt.finish(model);
  }
}

TEST_CASE("steps of cocod's update::AdamW and update::Adam equal torch::optim's on the same parameters and gradients, within 4 ulp") {
  for (const bool decoupled : {true, false}) {
    for (const double wd : {0.0, 0.1}) {
      CAPTURE(decoupled);
      CAPTURE(wd);
      const std::int64_t n = 4000;
      torch::manual_seed(17);
      torch::Tensor p = (torch::randn({n}) * 0.5).set_requires_grad(true);
      std::vector<float> x(static_cast<std::size_t>(n));
      std::unique_ptr<torch::optim::Optimizer> reference;
      if (decoupled)
        reference = std::make_unique<torch::optim::AdamW>(std::vector<torch::Tensor>{p},
                                                           torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).weight_decay(wd));
      else
        reference = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{p},
                                                          torch::optim::AdamOptions(3e-3).betas({0.9, 0.95}).weight_decay(wd));
      auto run = [&](auto rule) {
        auto state = rule.template start<cocod::backend::cpu, float>(x.size());
        double worst = 0;
        std::size_t equal = 0, total = 0;
        for (int step = 0; step < 20; ++step) {
          const torch::Tensor before = p.detach().clone();
          std::copy(before.data_ptr<float>(), before.data_ptr<float>() + n, x.begin());  // from torch's parameters
          torch::Tensor g = torch::randn({n}) * (step % 3 == 0 ? 1e-3 : 2.0);
          p.mutable_grad() = g.clone();
          reference->step();
          std::vector<float> gc(g.data_ptr<float>(), g.data_ptr<float>() + n);
          state.apply(std::span<float>(x), std::span<float>(gc), 3e-3f);
          const float* r = p.detach().data_ptr<float>();
          for (std::int64_t j = 0; j < n; ++j, ++total) {
            const auto k = static_cast<std::size_t>(j);
            worst = std::max(worst, ulps(r[j], x[k], before.data_ptr<float>()[j]));
            equal += r[j] == x[k];
          }
        }
        MESSAGE("torch::optim::" << std::string(decoupled ? "AdamW" : "Adam") << " (weight decay " << wd << ") vs cocod: " << equal
                                 << " of " << total << " updated parameters bitwise equal, the others within " << worst
                                 << " ulp");
        CHECK(worst <= 4.0);  // measured: about 99% bitwise equal, the others within 4 ulp (torch's fused multiply-adds)
        CHECK(equal > total * 9 / 10);
      };
      if (decoupled) run(cocod::update::AdamW{.beta2 = 0.95, .weight_decay = wd});
      else run(cocod::update::Adam{.beta2 = 0.95, .weight_decay = wd});
    }
  }
}

TEST_CASE("a Sequential trains under CoCoD-SGD on two workers: the loss falls and the workers agree") {
  std::vector<float> first(2), last(2);
  std::vector<std::vector<float>> finals(2);
  std::mutex torch_init;
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    Shard data;
    torch::nn::Sequential net{nullptr};
    {
      std::lock_guard lock(torch_init);  // torch::manual_seed is one generator for the process
      data = shard(256, 10 + r);
      net = mlp(20 + r);  // different initial weights: begin() broadcasts rank 0's
    }
    auto model = cocod::torch::make_model(net, data.inputs, data.targets, cross_entropy);
    cocod::CoCoDSGD<decltype(model), cocod::comm::Threads> opt{
        comm, {.learning_rate = 0.1, .period = 4, .batch_size = 16}, cocod::update::Sgd{.momentum = 0.9}};
    const cocod::Report report = opt.optimize(model, cocod::Epochs{6});
    first[r] = static_cast<float>(report.rounds.front().loss);
    last[r] = static_cast<float>(report.rounds.back().loss);
    finals[r].assign(model.parameters().begin(), model.parameters().end());
  });
  CHECK(last[0] < 0.5f * first[0]);
  CHECK(last[1] < 0.5f * first[1]);
  CHECK(finals[0] == finals[1]);  // the consensus, bitwise the same on both workers
}

TEST_CASE("a module's own BatchNorm statistics are averaged at each round's end and travel in checkpoints") {
  const auto dir = std::filesystem::temp_directory_path() / "cocod_test_torch_checkpoint";
  std::filesystem::remove_all(dir);
  std::vector<std::vector<float>> buffers(2), resumed(2);
  std::vector<std::int64_t> counted(2), counted_resumed(2);
  std::mutex torch_init;
  auto run = [&](bool resume) {
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
      const auto r = static_cast<std::size_t>(comm.rank());
      auto [data, net] = shard_and_net(torch_init, 128, 30 + r, 40);
      auto model = cocod::torch::make_model(net, data.inputs, data.targets, cross_entropy);
      CHECK(model.buffers().size() == 2 * 16);  // running_mean and running_var; num_batches_tracked is kept
      cocod::LocalSGD<decltype(model), cocod::comm::Threads> opt{comm, {.learning_rate = 0.05, .period = 3, .batch_size = 8}};
      cocod::Checkpoints store(dir);
      if (resume) {
        REQUIRE(opt.resume(model, store, cocod::Steps{12}));
        resumed[r].assign(model.buffers().begin(), model.buffers().end());
        counted_resumed[r] = net->norm->num_batches_tracked.item<std::int64_t>();
        (void)opt.finish(model);
        return;
      }
      opt.begin(model, cocod::Steps{12});
      for (int s = 0; s < 6; ++s) (void)opt.step(model, opt.next_batch());
      REQUIRE(opt.round_ended());
      buffers[r].assign(model.buffers().begin(), model.buffers().end());
      counted[r] = net->norm->num_batches_tracked.item<std::int64_t>();
      CHECK(net->norm->running_mean.data_ptr<float>() == model.buffers().data());  // a view, not a copy
      opt.save(model, store);
      (void)opt.finish(model);
    });
  };
  run(false);
  CHECK(buffers[0] == buffers[1]);  // averaged: the same on both workers
  // running_mean (the first 16) moved from its initial zeros
  CHECK(std::any_of(buffers[0].begin(), buffers[0].begin() + 16, [](float v) { return v != 0.0f; }));
  CHECK(counted[0] == 6);
  CHECK(counted[1] == 6);
  run(true);
  CHECK(resumed[0] == buffers[0]);
  CHECK(resumed[1] == buffers[1]);
  CHECK(counted_resumed[0] == 6);
  CHECK(counted_resumed[1] == 6);
  std::filesystem::remove_all(dir);
}

namespace {
// A NaN loss on rank 1 at its local step 5 (the statistics' NaN is Net's poison_at).
struct NaNAt {
  bool bad = false;
  std::size_t step = 0;
  torch::Tensor operator()(const torch::Tensor& out, const torch::Tensor& y) {
    const bool now = bad && step++ == 5;
    return F::cross_entropy(now ? out * std::numeric_limits<float>::quiet_NaN() : out, y);
  }
};
struct BatchNormOutcome {
  std::vector<std::string> errors = std::vector<std::string>(2);
  std::vector<std::vector<float>> buffers = std::vector<std::vector<float>>(2), x = std::vector<std::vector<float>>(2);
  std::size_t skipped = 0;
};
// 2 workers, the BatchNorm module, a NaN on rank 1 at its step 5 (NaNAt): what each one ends with.
template <template <class...> class Algorithm>
BatchNormOutcome batchnorm_nan(cocod::NonFinite policy, bool nan_in_statistics) {
  BatchNormOutcome out;
  std::mutex torch_init;
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    auto [data, net] = shard_and_net(torch_init, 128, 30 + r, 40);
    if (nan_in_statistics && r == 1) net->poison_at = 5;  // a NaN in the running mean while the loss stays finite
    auto model = cocod::torch::make_model(net, data.inputs, data.targets, NaNAt{r == 1 && !nan_in_statistics});
    Algorithm<decltype(model), cocod::comm::Threads> opt{comm, {.learning_rate = 0.05, .period = 4, .batch_size = 128,
                                                               .non_finite = policy}};
    try {
      const cocod::Report report = opt.optimize(model, cocod::Steps{16});
      if (r == 0) out.skipped = static_cast<std::size_t>(report.total(&cocod::RoundStats::skipped));
    } catch (const cocod::NonFiniteError& e) {
      out.errors[r] = e.what();
    }
    out.buffers[r].assign(model.buffers().begin(), model.buffers().end());
    out.x[r].assign(model.parameters().begin(), model.parameters().end());
  });
  return out;
}
bool finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); });
}
}  // namespace

TEST_CASE("a NaN with a BatchNorm module: its statistics are guarded like the parameters, named in the error") {
  SUBCASE("a NaN loss on one rank, CoCoD-SGD, skip: the run ends with every model and statistic finite") {
    const auto o = batchnorm_nan<cocod::Optimizer>(cocod::NonFinite::skip, false);
    for (const auto& e : o.errors) CHECK(e.empty());
    CHECK(o.skipped >= 1);
    for (std::size_t r = 0; r < 2; ++r) {
      CHECK(finite(o.buffers[r]));
      CHECK(finite(o.x[r]));
    }
    CHECK(o.buffers[0] == o.buffers[1]);
  }
  for (const bool statistics : {false, true}) {
    CAPTURE(statistics);
    const auto cocod_raise = batchnorm_nan<cocod::Optimizer>(cocod::NonFinite::raise, statistics);
    const auto ssgd_raise = batchnorm_nan<cocod::SyncSGD>(cocod::NonFinite::raise, statistics);
    for (const auto* o : {&cocod_raise, &ssgd_raise}) {
      for (const auto& e : o->errors) {
        CAPTURE(e);
        CHECK(e == o->errors[0]);
        CHECK(e.find(statistics ? "the buffers() of rank 1 were not finite" : "rank 1 had a non-finite loss at step 5") != std::string::npos);
        CHECK(e.find("(step ") != std::string::npos);
        if (statistics) CHECK(e.find("the buffers are left at the consensus of the finite ones") != std::string::npos);
      }
      for (std::size_t r = 0; r < 2; ++r) {  // left at the consensus of the finite contributions
        CHECK(finite(o->buffers[r]));
        CHECK(finite(o->x[r]));
      }
      CHECK(o->buffers[0] == o->buffers[1]);
    }
  }
}

TEST_CASE("num_batches_tracked stays each worker's own count after ->to(torch::kFloat) and ->to(torch::kDouble)") {
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    std::vector<double> counted(3);
    std::vector<std::size_t> averaged(3);
    std::mutex torch_init;
    cocod::comm::Threads::run(3, [&](cocod::comm::Threads comm) {
      const auto r = static_cast<std::size_t>(comm.rank());
      auto [data, net] = shard_and_net(torch_init, 64, 50 + r, 41);
      net->to(dtype);  // casts every buffer, the Long counter too
      data.inputs = data.inputs.to(dtype);
      auto step_run = [&](auto model) {
        averaged[r] = model.buffers().size();
        cocod::LocalSGD<decltype(model), cocod::comm::Threads> opt{comm, {.learning_rate = 0.05, .period = 3, .batch_size = 8}};
        opt.optimize(model, cocod::Steps{100});
      };
      if (dtype == torch::kFloat) step_run(cocod::torch::make_model(net, data.inputs, data.targets, cross_entropy));
      else step_run(cocod::torch::ModuleModel<Net, Loss, double>(net, data.inputs, data.targets, cross_entropy));
      counted[r] = net->norm->num_batches_tracked.to(torch::kDouble).item<double>();
    });
    CHECK(counted == std::vector<double>{100.0, 100.0, 100.0});  // exactly, not 100.00000x
    CHECK(averaged == std::vector<std::size_t>{32, 32, 32});    // running mean and variance only
  }
}

namespace {
// A module with a parameter its forward() never uses.
struct UnusedImpl : torch::nn::Module {
  torch::nn::Linear fc{nullptr};
  torch::Tensor unused;
  UnusedImpl() {
    fc = register_module("fc", torch::nn::Linear(8, 3));
    unused = register_parameter("unused", torch::ones({1}));
  }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
};
TORCH_MODULE(Unused);
}  // namespace

TEST_CASE("a parameter without a gradient in a step is still moved by weight decay, as docs/torch.md says") {
  // torch::optim::SGD skips a parameter whose .grad() is undefined; cocod updates the whole flat
  // tensor, with a zero gradient there
  torch::manual_seed(3);
  Unused net;
  const Shard data = shard(32, 4);
  auto model = cocod::torch::make_model(net, data.inputs, data.targets, cross_entropy);
  cocod::LocalSGD<decltype(model), cocod::comm::Local> opt{cocod::comm::Local{}, {.learning_rate = 0.1, .batch_size = 8},
                                                            cocod::update::Sgd{.weight_decay = 0.1}};
  opt.optimize(model, cocod::Steps{1});
  CHECK(net->unused.item<float>() == doctest::Approx(1.0f - 0.1f * 0.1f));
}

TEST_CASE("modules built differently on one worker are refused at begin(), on every worker, naming the workers") {
  // layers of the same sizes in another order; a frozen layer initialised otherwise
  auto errors_of = [](auto build) {
    std::vector<std::string> errors(3);
    std::mutex torch_init;
    cocod::comm::Threads::run(3, [&](cocod::comm::Threads comm) {
      Shard data;
      torch::nn::Sequential net;
      {
        std::lock_guard lock(torch_init);
        data = shard(32, 70);
        torch::manual_seed(5);
        net = build(comm.rank());
      }
      auto model = cocod::torch::make_model(net, data.inputs, data.targets, cross_entropy);
      cocod::LocalSGD<decltype(model), cocod::comm::Threads> opt{comm, {.batch_size = 8}};
      try {
        opt.begin(model, cocod::Steps{2});
        (void)opt.finish(model);
      } catch (const cocod::DistributedError& e) {
        errors[static_cast<std::size_t>(comm.rank())] = e.what();
      }
    });
    return errors;
  };
  const auto reordered = errors_of([](int rank) {
    return rank == 2 ? torch::nn::Sequential(torch::nn::Linear(8, 8), torch::nn::ReLU(), torch::nn::Linear(8, 8), torch::nn::Linear(8, 3))
                     : torch::nn::Sequential(torch::nn::Linear(8, 8), torch::nn::Linear(8, 8), torch::nn::ReLU(), torch::nn::Linear(8, 3));
  });
  const auto frozen = errors_of([](int rank) {
    torch::nn::Sequential net(torch::nn::Linear(8, 8), torch::nn::ReLU(), torch::nn::Linear(8, 3));
    auto first = net[0]->as<torch::nn::Linear>();
    first->weight.set_requires_grad(false);
    if (rank == 1) {
      torch::NoGradGuard no_grad;
      first->weight.add_(1.0f);
    }
    return net;
  });
  for (const auto& [errors, differs] : {std::pair{reordered, std::string("; rank 2 has ")}, std::pair{frozen, std::string("; rank 1 has ")}}) {
    for (const auto& e : errors) {
      CAPTURE(e);
      CHECK(e == errors[0]);
      CHECK(e.find("the models' layout (layout_fingerprint()") != std::string::npos);
      CHECK(e.find(differs) != std::string::npos);
    }
  }
}

TEST_CASE("modules and data the adapter cannot drive are refused, naming what is wrong") {
  auto data = shard(16, 50);
  SUBCASE("a parameter that is not float") {
    struct MixedImpl : torch::nn::Module {
      torch::nn::Linear fc{nullptr};
      torch::Tensor bias2;
      MixedImpl() {
        fc = register_module("fc", torch::nn::Linear(8, 3));
        bias2 = register_parameter("bias2", torch::zeros({3}, torch::kDouble));
      }
      torch::Tensor forward(torch::Tensor x) { return fc(x) + bias2.to(torch::kFloat); }
    };
    auto net = std::make_shared<MixedImpl>();
    CHECK_THROWS_WITH_AS(cocod::torch::make_model(net, data.inputs, data.targets, cross_entropy),
                         "cocod::torch::ModuleModel: parameter 'bias2' is Double; every parameter must be Float "
                         "(convert the module with ->to(torch::kFloat), or adapt it as ModuleModel<Net, Loss, double>)",
                         std::invalid_argument);
  }
  SUBCASE("a module in double, adapted as double, works") {
    auto net = mlp(51);
    net->to(torch::kDouble);
    cocod::torch::ModuleModel<torch::nn::Sequential, Loss, double> model(net, data.inputs.to(torch::kDouble), data.targets,
                                                                         cross_entropy);
    std::vector<double> g(model.parameters().size());
    const std::vector<std::size_t> batch{0, 1, 2};
    CHECK(std::isfinite(model.loss_and_gradient(batch, g)));
  }
  SUBCASE("inputs and targets of different lengths") {
    CHECK_THROWS_WITH_AS(cocod::torch::make_model(mlp(52), data.inputs, data.targets.narrow(0, 0, 10), cross_entropy),
                         "cocod::torch::ModuleModel: inputs and targets must hold the same number of samples along "
                         "dimension 0 (inputs: [16, 8], targets: [10])",
                         std::invalid_argument);
  }
  SUBCASE("a module whose parameters are all frozen") {
    auto net = mlp(53);
    for (auto& p : net->parameters()) p.set_requires_grad(false);
    CHECK_THROWS_WITH_AS(cocod::torch::make_model(net, data.inputs, data.targets, cross_entropy),
                         "cocod::torch::ModuleModel: the module has no parameter that requires a gradient",
                         std::invalid_argument);
  }
  SUBCASE("data or a module that is not on the CPU") {
    // The meta device stands in for CUDA, which this build of libtorch may not have: any tensor
    // off the CPU is refused by name.
    CHECK_THROWS_WITH_AS(cocod::torch::make_model(mlp(55), data.inputs.to(torch::kMeta), data.targets, cross_entropy),
                         "cocod::torch::ModuleModel: inputs is on meta: the adapter drives CPU tensors (move the module "
                         "and the data with .to(torch::kCPU))",
                         std::invalid_argument);
    struct OffCpuImpl : torch::nn::Module {
      torch::Tensor weight;
      OffCpuImpl() { weight = register_parameter("weight", torch::zeros({8, 3}, torch::device(torch::kMeta))); }
      torch::Tensor forward(torch::Tensor x) { return x.matmul(weight); }
    };
    CHECK_THROWS_WITH_AS(cocod::torch::make_model(std::make_shared<OffCpuImpl>(), data.inputs, data.targets, cross_entropy),
                         "cocod::torch::ModuleModel: parameter 'weight' is on meta: the adapter drives CPU tensors "
                         "(move the module and the data with .to(torch::kCPU))",
                         std::invalid_argument);
  }
  SUBCASE("a loss that is not a scalar") {
    auto none = [](const torch::Tensor& out, const torch::Tensor& y) {
      return F::cross_entropy(out, y, F::CrossEntropyFuncOptions().reduction(torch::kNone));
    };
    auto model = cocod::torch::make_model(mlp(54), data.inputs, data.targets, none);
    std::vector<float> g(model.parameters().size());
    const std::vector<std::size_t> batch{0, 1};
    CHECK_THROWS_WITH_AS(model.loss_and_gradient(batch, g),
                         "cocod::torch::ModuleModel: the loss returned a tensor of shape [2]; it must return the batch's "
                         "mean loss, a scalar",
                         std::invalid_argument);
  }
}

TEST_CASE("a step under the caller's torch::NoGradGuard still computes the gradient") {
  auto data = shard(32, 60);
  auto model = cocod::torch::make_model(mlp(61), data.inputs, data.targets, cross_entropy);
  std::vector<float> g(model.parameters().size(), 0.0f);
  const std::vector<std::size_t> batch{0, 1, 2, 3};
  torch::NoGradGuard no_grad;
  (void)model.loss_and_gradient(batch, g);
  CHECK(std::any_of(g.begin(), g.end(), [](float v) { return v != 0.0f; }));
  CHECK_FALSE(torch::GradMode::is_enabled());  // the caller's mode is back
}

TEST_CASE("tied weights count once, frozen parameters are left alone, and modes can be kept") {
  auto data = shard(32, 70);
  torch::manual_seed(71);
  torch::nn::Linear shared(8, 8);
  auto net = torch::nn::Sequential(shared, torch::nn::ReLU(), shared, torch::nn::Linear(8, 3));
  net[3]->as<torch::nn::Linear>()->bias.set_requires_grad(false);  // frozen
  const torch::Tensor frozen = net[3]->as<torch::nn::Linear>()->bias.detach().clone();
  auto model = cocod::torch::make_model(net, data.inputs, data.targets, cross_entropy);
  CHECK(model.parameters().size() == 8 * 8 + 8 + 8 * 3);  // the shared layer once, no frozen bias
  cocod::LocalSGD<decltype(model), cocod::comm::Local> opt{cocod::comm::Local{}, {.learning_rate = 0.1, .batch_size = 8}};
  net->eval();
  model.train_each_step(false);
  (void)opt.optimize(model, cocod::Steps{3});
  CHECK(torch::equal(net[3]->as<torch::nn::Linear>()->bias, frozen));
  CHECK_FALSE(net->is_training());  // left as set
}

TEST_CASE("a parameter moved out of the flat tensor after adapting is an error at the next step, naming it") {
  auto data = shard(16, 80);
  auto net = mlp(81);
  auto model = cocod::torch::make_model(net, data.inputs, data.targets, cross_entropy);
  {
    torch::NoGradGuard no_grad;
    net[2]->as<torch::nn::Linear>()->weight.set_data(torch::zeros({3, 16}));  // as torch::load would
  }
  std::vector<float> g(model.parameters().size());
  const std::vector<std::size_t> batch{0, 1};
  CHECK_THROWS_WITH_AS(model.loss_and_gradient(batch, g),
                       doctest::Contains("cocod::torch::ModuleModel: parameter '2.weight' no longer lives in the "
                                         "adapter's flat tensor"),
                       std::logic_error);
}
