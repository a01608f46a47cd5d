#pragma once
// Where the Fashion-MNIST examples find their data (--data): the folder is checked before
// anything is trained (a wrong path is a usage error), and a damaged file is named. Example code,
// not part of the library.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "idx.hpp"

namespace fmnist {

/// Where Debian's dataset-fashion-mnist puts the files.
inline const char* debian_data = "/usr/share/datasets/fashion-mnist";

/// The four gzipped IDX files of the training and the test set.
inline std::vector<std::string> data_files() {
  return {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
}

/// --data DIR, given or not, before anything is trained: a folder that holds the four files, or
/// the command line is refused (exit status 2); Debian's package is named for its own folder only.
inline void require_data(const std::string& dir, const std::string& program) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string install = dir == debian_data ? " (Debian: apt-get install dataset-fashion-mnist)" : "";
  if (!fs::is_directory(dir, ec)) cli::refuse(program, "--data: no folder '" + dir + "'" + install);
  for (const auto& file : data_files())
    if (!fs::is_regular_file(fs::path(dir) / file, ec)) cli::refuse(program, "--data: '" + dir + "' has no " + file + install);
}

/// The training and the test set in `dir` (see require_data()); a damaged file is reported
/// by name (nullopt).
inline std::optional<std::pair<idx::Dataset, idx::Dataset>> load_sets(const std::string& dir, const char* program) {
  const auto files = data_files();
  try {
    return std::pair{idx::load(dir + "/" + files[0], dir + "/" + files[1]), idx::load(dir + "/" + files[2], dir + "/" + files[3])};
  } catch (const idx::Error& e) {
    std::fprintf(stderr, "%s: %s (a damaged file%s)\n", program, e.what(),
                 dir == debian_data ? ": apt-get install --reinstall dataset-fashion-mnist" : "");
    return std::nullopt;
  }
}

}  // namespace fmnist
