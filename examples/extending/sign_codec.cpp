// A new codec: the scaled sign, one bit per element. CoCoD-SGD sends with it on two workers
// over comm::Threads; both end with the same bits, within reach of the uncompressed run, with
// about a sixth of int8's bytes; a block of 0 is refused, naming the field.
#include <cocod.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sign_codec.hpp"

struct Quadratic {  // f(x) = mean_i 0.5 |x - c_i|^2 over this worker's centres c_i
  std::vector<float> x = std::vector<float>(1000, 0.0f);
  int rank = 0;
  std::span<float> parameters() { return x; }
  std::size_t num_samples() const { return 64; }
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<float> g) {
    double loss = 0.0;
    std::fill(g.begin(), g.end(), 0.0f);
    for (auto i : batch) {
      const float c = static_cast<float>(i % 7) + static_cast<float>(rank);
      for (std::size_t d = 0; d < x.size(); ++d) {
        const float r = x[d] - c * static_cast<float>(1 + d % 3);
        g[d] += r / static_cast<float>(batch.size());
        loss += 0.5 * r * r;
      }
    }
    return loss / static_cast<double>(batch.size());
  }
};

// The minimiser of the two workers' mean loss: x*_d = (1 + d % 3) (mean of i % 7 over the samples + 1/2).
double distance_to_optimum(const std::vector<float>& x) {
  double mean_c = 0.5;
  for (std::size_t i = 0; i < 64; ++i) mean_c += static_cast<double>(i % 7) / 64.0;
  double sum = 0.0;
  for (std::size_t d = 0; d < x.size(); ++d) {
    const double r = x[d] - mean_c * static_cast<double>(1 + d % 3);
    sum += r * r;
  }
  return std::sqrt(sum);
}

struct Outcome {
  double bytes_per_round = 0;  // rank 0's, in the exchange
  double distance = 0;         // |x - x*| of the consensus at the end
  bool same = false;           // both workers hold the same bits
};

Outcome train(cocod::Compress compress) {
  const cocod::Options options{.learning_rate = 0.05, .period = 4, .batch_size = 4};
  Outcome out;
  std::vector<std::vector<float>> models(2);
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads comm) {
    Quadratic model{.rank = comm.rank()};
    cocod::Optimizer<Quadratic, cocod::comm::Threads> opt{comm, options, compress};
    const cocod::Report r = opt.optimize(model, cocod::Rounds{40});
    models[static_cast<std::size_t>(comm.rank())] = model.x;
    if (comm.rank() == 0) out.bytes_per_round = r.median(&cocod::RoundStats::bytes_sent);
  });
  out.same = models[0] == models[1];
  out.distance = distance_to_optimum(models[0]);
  return out;
}

int main() {
  const Outcome plain = train({});
  const Outcome int8 = train({.format = cocod::Compression::int8});
  const Outcome sign = train({.format = cocod::Compression::of<SignCodec>()});
  std::printf("start: distance to the optimum %.1f\n", distance_to_optimum(std::vector<float>(1000, 0.0f)));
  for (const auto& [name, o] : {std::pair{"none", plain}, std::pair{"int8", int8}, std::pair{"sign", sign}})
    std::printf("%-5s: %6.0f bytes per round, distance to the optimum %.2f, workers %s\n", name, o.bytes_per_round,
                o.distance, o.same ? "identical" : "DIFFER");
  const bool fewer = sign.bytes_per_round * 5 < int8.bytes_per_round;
  const bool close = sign.distance < 1.5 * plain.distance;
  std::printf("sign: %.1fx fewer bytes than int8, distance within 1.5x of none: %s\n",
              int8.bytes_per_round / sign.bytes_per_round, close ? "yes" : "NO");
  std::string refused;
  try {
    (void)train({.format = cocod::Compression::of<SignCodec>(), .block = 0});
  } catch (const std::invalid_argument& e) {
    refused = e.what();
  }
  std::printf("block 0: %s\n", refused.empty() ? "ACCEPTED" : refused.c_str());
  return sign.same && int8.same && fewer && close && !refused.empty() ? 0 : 1;
}
