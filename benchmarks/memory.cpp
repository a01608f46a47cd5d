// Peak resident memory of each algorithm over the model size, against the design: the buffers
// each algorithm keeps beyond the model (docs/algorithm.md).
//
//   memory [--mib M] [--csv FILE]
//
// Each (algorithm, momentum, communicator) runs in a fresh process (this program re-runs itself)
// so that the peak (VmHWM of /proc/self/status) is its own. extra = (peak - resident after the
// model was built) / model bytes, per worker. The model's gradient is free (g = x), so all the
// memory is the optimizer's and the communicator's. The design: CoCoD-SGD keeps an anchor, a send
// buffer and a gradient; Local-SGD a gradient and a send buffer; S-SGD one reduction buffer;
// Pipe-SGD two gradient buffers; each + momentum when mu > 0; comm::Threads adds its
// reduce-scatter slice, 1/N of the model per worker.
#include <cocod.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "cli.hpp"  // examples/common: the command-line checks
#include "common/table.hpp"

namespace {
using T = float;

struct Flat {
  std::vector<T> x;
  std::span<T> parameters() { return x; }
  std::size_t num_samples() const { return 1024; }
  double loss_and_gradient(std::span<const std::size_t>, std::span<T> g) {
    for (std::size_t i = 0; i < x.size(); ++i) g[i] = T(1e-3) * x[i];
    return 0.0;
  }
};

double hwm_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) * 1024.0;
  return 0.0;
}

/// Buffers of model size each algorithm keeps beyond the model (the design), per worker, plus
/// comm::Threads' reduce-scatter slice (1/N of the model per worker; comm::Local has none).
double expected(const std::string& algo, bool momentum, int workers, bool threads) {
  const double m = (momentum ? 1 : 0) + (threads ? 1.0 / workers : 0.0);
  if (algo == "cocod") return 3 + m;  // anchor, send buffer, gradient
  if (algo == "local") return 2 + m;  // gradient, send buffer
  if (algo == "ssgd") return 1 + m;   // reduction buffer (the gradient is computed into it)
  return 2 + m;                       // pipe: two gradient buffers
}

template <class Comm>
void train(Comm comm, const std::string& algo, bool momentum, std::size_t n, double* baseline) {
  Flat model{std::vector<T>(n, T(1))};
  const cocod::Options o{.learning_rate = 0.01, .period = 4, .batch_size = 8};
  const cocod::update::Sgd sgd{.momentum = momentum ? 0.9 : 0.0};
  comm.all_reduce(std::span<T>(model.x).first(1));  // both workers have built their model
  if (comm.rank() == 0) *baseline = hwm_bytes();
  comm.all_reduce(std::span<T>(model.x).first(1));
  auto run = [&](auto&& opt) { opt.optimize(model, cocod::Steps{12}); };
  if (algo == "cocod") run(cocod::CoCoDSGD<Flat, Comm>{comm, o, sgd});
  else if (algo == "local") run(cocod::LocalSGD<Flat, Comm>{comm, o, sgd});
  else if (algo == "ssgd") run(cocod::SyncSGD<Flat, Comm>{comm, o, sgd});
  else run(cocod::PipeSGD<Flat, Comm>{comm, o, sgd});
}

int one(const std::string& algo, bool momentum, const std::string& comm, std::size_t n) {
  double baseline = 0;
  if (comm == "local") {
    train(cocod::comm::Local{}, algo, momentum, n, &baseline);
  } else {
    cocod::comm::Threads::run(2, [&](cocod::comm::Threads c) { train(c, algo, momentum, n, &baseline); });
  }
  std::printf("%.0f %.0f\n", baseline, hwm_bytes());
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 64;
  std::string csv;
  if (argc == 6 && std::string(argv[1]) == "--one")  // one run in its own process (see above)
    return one(argv[2], std::string(argv[3]) == "1", argv[4], std::strtoul(argv[5], nullptr, 10));
  CLI::App app("Peak resident memory of each algorithm beyond the model, against the design.");
  cli::last_value_wins(app);
  app.add_option("--mib", mib, "model size in MiB")->type_name("M")->capture_default_str()->check(cli::whole(1, 4096));
  app.add_option("--csv", csv, "also write the table to FILE as CSV")->type_name("FILE");
  cli::parse(app, argc, argv);
  const std::size_t n = mib * (1u << 20) / sizeof(T);
  const double model_bytes = static_cast<double>(n * sizeof(T));
  bench::Table table("peak resident memory beyond the model, per worker, in model sizes; model " + std::to_string(mib) +
                         " MiB of float; " + bench::today(),
                     {{"algorithm", "", 10, -1}, {"momentum", "", 8, -1}, {"comm", "", 10, -1}, {"workers", "", 7, -1},
                      {"peak", "MiB", 9, 1}, {"extra", "models", 7, 2}, {"design", "models", 7, 2}, {"correct", "", 7, -1}},
                     csv);
  for (const char* comm : {"local", "threads"})
    for (const char* algo : {"cocod", "local", "ssgd", "pipe"})
      for (int momentum : {0, 1}) {
        const std::string cmd = std::string(argv[0]) + " --one " + algo + " " + std::to_string(momentum) + " " + comm + " " +
                                std::to_string(n);
        FILE* p = popen(cmd.c_str(), "r");
        double baseline = 0, peak = 0;
        const bool read = p && std::fscanf(p, "%lf %lf", &baseline, &peak) == 2;
        const bool ran = p && pclose(p) == 0 && read;
        const int workers = std::string(comm) == "threads" ? 2 : 1;
        const double extra = (peak - baseline) / model_bytes / workers;
        const double design = expected(algo, momentum == 1, workers, std::string(comm) == "threads");
        // correct: the measured extra is the design's count within a quarter of a model
        const bool ok = ran && extra < design + 0.25 && extra > design - 0.25;
        table.row({algo, momentum ? "0.9" : "0", comm, std::to_string(workers), table.number(4, peak / (1 << 20)),
                   table.number(5, extra), table.number(6, design), ok ? "OK" : "DIFFERS"},
                  ok);
      }
  return table.finish("memory");
}
