#pragma once
// The text the language model learns: every fortune file that Debian's `fortunes` package
// installs (/usr/share/games/fortunes), as bytes, each file split into a training part and a
// validation part (its last share), and cut into samples of `context` + 1 bytes. Example code.
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace lm {

struct Corpus {
  std::string train, validation;
  std::vector<std::string> files;  // the files read, in name order
};

/// Every regular file of `dir` except the fortune indexes (*.dat) and the UTF-8 copies (*.u8),
/// in name order; the last `validation_share` of each goes to the validation text. Empty when the
/// folder holds none (`error` then says why).
inline std::optional<Corpus> read_corpus(const std::string& dir, double validation_share, std::string& error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    error = dir + " is not a folder";
    return std::nullopt;
  }
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && ext != ".dat" && ext != ".u8") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  Corpus c;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    if (text.empty()) continue;
    const auto cut = static_cast<std::size_t>(static_cast<double>(text.size()) * (1.0 - validation_share));
    c.train += text.substr(0, cut);
    c.validation += text.substr(cut);
    c.files.push_back(p.filename().string());
  }
  if (c.files.empty()) {
    error = "no text files in " + dir;
    return std::nullopt;
  }
  return c;
}

/// Samples of a text: sample i is bytes [i c, i c + c) and its targets the bytes one further.
struct Samples {
  torch::Tensor inputs, targets;  // [samples, context], int64
};

/// The samples `first`, `first + stride`, ... of `text` (every one when stride = 1), at most `limit`.
inline Samples cut(const std::string& text, std::int64_t context, std::int64_t first, std::int64_t stride,
                   std::int64_t limit = -1) {
  const std::int64_t all = (static_cast<std::int64_t>(text.size()) - 1) / context;
  std::vector<std::int64_t> in, out;
  std::int64_t taken = 0;
  for (std::int64_t i = first; i < all && (limit < 0 || taken < limit); i += stride, ++taken)
    for (std::int64_t j = 0; j < context; ++j) {
      const auto at = static_cast<std::size_t>(i * context + j);
      in.push_back(static_cast<unsigned char>(text[at]));
      out.push_back(static_cast<unsigned char>(text[at + 1]));
    }
  return {torch::tensor(in, torch::kLong).view({taken, context}), torch::tensor(out, torch::kLong).view({taken, context})};
}

}  // namespace lm
