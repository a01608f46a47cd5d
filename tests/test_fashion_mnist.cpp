// The Fashion-MNIST example's pieces: the IDX reader on good, truncated and corrupt files, and
// the MLP's gradient against finite differences and its loss going down on real data.
#include <doctest/doctest.h>

#include <zlib.h>

#include <cocod.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "idx.hpp"
#include "models.hpp"

namespace {
namespace fs = std::filesystem;
const std::string data_dir = "/usr/share/datasets/fashion-mnist";

std::vector<std::uint8_t> idx_bytes(std::vector<std::uint32_t> dims, std::size_t payload, std::uint8_t value = 1) {
  std::vector<std::uint8_t> b{0, 0, 8, static_cast<std::uint8_t>(dims.size())};
  for (auto d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(d >> s));
  b.insert(b.end(), payload, value);
  return b;
}
std::string write_gz(const std::string& name, const std::vector<std::uint8_t>& bytes) {
  const auto path = (fs::temp_directory_path() / name).string();
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  return path;
}
std::string write_raw(const std::string& name, const std::vector<std::uint8_t>& bytes) {
  const auto path = (fs::temp_directory_path() / name).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
  return path;
}
}  // namespace

TEST_CASE("the IDX reader reads good files, gzip or not") {
  const auto images = write_gz("cocod_ok_images.gz", idx_bytes({3, 2, 2}, 12, 200));
  const auto labels = write_raw("cocod_ok_labels", idx_bytes({3}, 3, 7));
  const auto d = idx::load(images, labels);
  CHECK(d.count == 3);
  CHECK(d.pixels == 4);
  CHECK(d.images[11] == 200);
  CHECK(d.labels[2] == 7);
}

TEST_CASE("the IDX reader names the file and the fault") {
  auto message = [](auto f) {
    try {
      f();
    } catch (const idx::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const auto missing = (fs::temp_directory_path() / "cocod_missing.gz").string();
  CHECK(message([&] { idx::read(missing); }) == missing + ": cannot open");
  auto bad_magic = idx_bytes({2}, 2);
  bad_magic[2] = 0x0D;
  const auto p1 = write_gz("cocod_magic.gz", bad_magic);
  CHECK(message([&] { idx::read(p1); }) == p1 + ": bad magic number (expected 00 00 08 xx for unsigned bytes)");
  const auto p2 = write_gz("cocod_short.gz", idx_bytes({10, 2, 2}, 39));
  CHECK(message([&] { idx::read(p2); }) == p2 + ": payload has 39 bytes, the header announces 40");
  // a gzip stream cut in the middle
  const auto whole = write_gz("cocod_whole.gz", idx_bytes({1000, 28, 28}, 784000, 3));
  std::ifstream in(whole, std::ios::binary);
  std::vector<char> gz((std::istreambuf_iterator<char>(in)), {});
  gz.resize(gz.size() / 2);
  const auto p3 = write_raw("cocod_cut.gz", std::vector<std::uint8_t>(gz.begin(), gz.end()));
  CHECK(message([&] { idx::read(p3); }).rfind(p3 + ": ", 0) == 0);
  CHECK(message([&] { idx::read(p3); }) != "(no error)");
  // corrupt gzip bytes
  auto corrupt = std::vector<std::uint8_t>(gz.begin(), gz.end());
  for (std::size_t i = 20; i < 200; ++i) corrupt[i] ^= 0x5A;
  const auto p4 = write_raw("cocod_corrupt.gz", corrupt);
  CHECK(message([&] { idx::read(p4); }).find(p4 + ": gzip error") == 0);
  // images and labels that do not match
  const auto im = write_gz("cocod_im.gz", idx_bytes({3, 2, 2}, 12));
  const auto lb = write_gz("cocod_lb.gz", idx_bytes({4}, 4));
  CHECK(message([&] { idx::load(im, lb); }) == im + " has 3 images but " + lb + " has 4 labels");
  const auto lb11 = write_gz("cocod_lb11.gz", idx_bytes({3}, 3, 11));
  CHECK(message([&] { idx::load(im, lb11); }) == lb11 + ": label 11 is not a class in [0, 10)");
}

TEST_CASE("the IDX reader refuses a header whose sizes overflow, before allocating") {
  // 65536^4 = 2^64 wraps to 0, which an empty payload would match
  const auto p = write_raw("cocod_overflow.idx", {0, 0, 8, 4, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0});
  CHECK_THROWS_WITH_AS(idx::read(p), (p + ": the header's sizes multiply beyond what memory can hold").c_str(), idx::Error);
}

TEST_CASE("the MLP's gradient matches finite differences") {
  fmnist::Shard s{fmnist::Matrix::Random(12, 20).cwiseAbs(), {}};
  for (int i = 0; i < 20; ++i) s.y.push_back(i % 10);
  fmnist::Network net(s, {12, 9, 7, 10}, 5);
  std::vector<std::size_t> batch{0, 3, 5, 7, 11, 19};
  auto x = net.parameters();
  std::vector<float> g(x.size()), unused(x.size());
  net.loss_and_gradient(batch, g);
  double worst = 0;
  cocod::Rng rng(1);
  for (int k = 0; k < 60; ++k) {
    const auto i = static_cast<std::size_t>(rng.below(x.size()));
    const float keep = x[i], h = 1e-2f;
    x[i] = keep + h;
    const double up = net.loss_and_gradient(batch, unused);
    x[i] = keep - h;
    const double down = net.loss_and_gradient(batch, unused);
    x[i] = keep;
    const double numeric = (up - down) / (2 * h);
    worst = std::max(worst, std::abs(numeric - g[i]) / (1e-2 + std::abs(numeric)));
  }
  CHECK(worst < 2e-2);
}

TEST_CASE("a short MLP run on Fashion-MNIST lowers the loss") {
  if (!fs::exists(data_dir + "/train-images-idx3-ubyte.gz")) {
    MESSAGE("dataset-fashion-mnist is not installed: skipped");
    return;
  }
  const auto train = idx::load(data_dir + "/train-images-idx3-ubyte.gz", data_dir + "/train-labels-idx1-ubyte.gz");
  CHECK(train.count == 60000);
  fmnist::Network net(fmnist::shard(train, 0, 20, false, 1), fmnist::mlp_sizes(), 1);  // 3000 samples
  cocod::Optimizer<fmnist::Network, cocod::comm::Local> opt{cocod::comm::Local{},
                                                            {.learning_rate = 0.05, .period = 5, .batch_size = 64},
                                                            cocod::update::Sgd{.momentum = 0.9}};
  const auto report = opt.optimize(net, cocod::Epochs{2});
  CHECK(report.rounds.back().loss < 0.7 * report.rounds.front().loss);
}
