// libFuzzer target: the Fashion-MNIST example's IDX reader. idx::parse() on the input's bytes,
// and idx::read() on the same bytes written to a file, which goes through zlib (a gzip stream
// is inflated, anything else read as it is). A refusal must be an idx::Error naming the file;
// an accepted file must hold the values its header announces; a file that is not gzip must
// read as its bytes parse. Any other outcome is a finding.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <typeinfo>

#include "fuzz_common.hpp"
#include "idx.hpp"

namespace {

using cocod_fuzz::finding;

void check(const idx::Array& a, const std::string& name) {
  if (a.dims.empty() || a.dims.size() > 4) finding(name + ": accepted with " + std::to_string(a.dims.size()) + " dimensions");
  std::size_t count = 1;
  for (const auto d : a.dims) count *= d;
  if (a.data.size() != count)
    finding(name + ": accepted with " + std::to_string(a.data.size()) + " values where the header announces " +
            std::to_string(count));
}

/// The outcome of a read: the array, or the refusal's message.
struct Outcome {
  std::optional<idx::Array> array;
  std::string error;
};
template <class Read>
Outcome attempt(const std::string& name, Read&& read) {
  try {
    Outcome o{read(), {}};
    check(*o.array, name);
    return o;
  } catch (const idx::Error& e) {
    cocod_fuzz::check_refusal(e, name + ": ", "idx::Error");
    return Outcome{std::nullopt, e.what()};
  }
}

const std::string& path() {
  static const cocod_fuzz::Scratch file("cocod-fuzz-idx");
  static const std::string p = file.path().string();
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const std::span<const std::uint8_t> bytes(data, size);
    const Outcome parsed = attempt("fuzz-input.idx", [&] { return idx::parse(bytes, "fuzz-input.idx"); });
    {
      std::ofstream out(path(), std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
      if (!out) finding("cannot write " + path());
    }
    const Outcome read = attempt(path(), [&] { return idx::read(path()); });
    const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    if (!gzip && parsed.array.has_value() != read.array.has_value())
      finding("parse() and read() disagree on a file that is not gzip: parse " +
              (parsed.array ? std::string("accepts it") : "refuses it: " + parsed.error) + "; read " +
              (read.array ? std::string("accepts it") : "refuses it: " + read.error));
    if (!gzip && parsed.array && (parsed.array->dims != read.array->dims || parsed.array->data != read.array->data))
      finding("parse() and read() give different arrays for a file that is not gzip");
  } catch (const std::exception& e) {
    finding(std::string("an exception other than idx::Error: ") + typeid(e).name() + ": " + e.what());
  }
  return 0;
}
