#pragma once
// Reader for the IDX files of (Fashion-)MNIST, gzip-compressed or not. Example code, not part of
// the library. Every failure names the file: a missing file, a gzip error, a bad magic number,
// a truncated payload, or images and labels that do not match.
#include <zlib.h>

#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace idx {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The decoded contents of one IDX file of unsigned bytes: its dimensions and values.
struct Array {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;
};

/// Reads a whole file through zlib (which also reads uncompressed files as they are).
inline std::vector<std::uint8_t> read_bytes(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Error(path + ": cannot open");
  std::vector<std::uint8_t> out;
  std::uint8_t buffer[1 << 16];
  for (;;) {
    const int n = gzread(f, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      const std::string message = gzerror(f, &code);
      gzclose(f);
      throw Error(path + ": gzip error: " + message);
    }
    if (n == 0) break;
    out.insert(out.end(), buffer, buffer + n);
  }
  // A truncated .gz stream ends without its trailer: zlib reports it at the end, not as n < 0.
  int code = 0;
  const std::string message = gzerror(f, &code);
  gzclose(f);
  if (code != Z_OK && code != Z_STREAM_END) throw Error(path + ": gzip error: " + message);
  return out;
}

/// Parses the bytes of an IDX file of unsigned bytes (magic 0x00 0x00 0x08 <number of
/// dimensions>); `name` is the file's name in errors. Apart from the file access, so that the
/// checks can be fuzzed on bytes alone (tests/fuzz).
inline Array parse(std::span<const std::uint8_t> bytes, const std::string& name) {
  if (bytes.size() < 4) throw Error(name + ": too short for an IDX header (" + std::to_string(bytes.size()) + " bytes)");
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08)
    throw Error(name + ": bad magic number (expected 00 00 08 xx for unsigned bytes)");
  const std::size_t rank = bytes[3];
  if (rank == 0 || rank > 4) throw Error(name + ": unsupported number of dimensions " + std::to_string(rank));
  if (bytes.size() < 4 + 4 * rank) throw Error(name + ": truncated header");
  Array a;
  std::size_t count = 1;
  for (std::size_t d = 0; d < rank; ++d) {
    const std::uint8_t* p = &bytes[4 + 4 * d];
    const std::uint32_t n = (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
    a.dims.push_back(n);
    if (n != 0 && count > std::numeric_limits<std::size_t>::max() / n)  // a crafted header
      throw Error(name + ": the header's sizes multiply beyond what memory can hold");
    count *= n;
  }
  const std::size_t header = 4 + 4 * rank;
  if (bytes.size() - header != count)
    throw Error(name + ": payload has " + std::to_string(bytes.size() - header) + " bytes, the header announces " +
                std::to_string(count));
  const auto payload = bytes.subspan(header);
  a.data.assign(payload.begin(), payload.end());
  return a;
}

/// Reads and parses an IDX file, gzip-compressed or not.
inline Array read(const std::string& path) { return parse(read_bytes(path), path); }

/// Images (n x rows x cols) and labels (n) of one split, checked against each other.
struct Dataset {
  std::size_t count = 0, pixels = 0;
  std::vector<std::uint8_t> images;  // count * pixels, row-major per image
  std::vector<std::uint8_t> labels;  // count, in [0, 10)
};

inline Dataset load(const std::string& images_path, const std::string& labels_path) {
  auto images = read(images_path);
  auto labels = read(labels_path);
  if (images.dims.size() != 3) throw Error(images_path + ": expected 3 dimensions (images x rows x cols)");
  if (labels.dims.size() != 1) throw Error(labels_path + ": expected 1 dimension (labels)");
  if (images.dims[0] != labels.dims[0])
    throw Error(images_path + " has " + std::to_string(images.dims[0]) + " images but " + labels_path + " has " +
                std::to_string(labels.dims[0]) + " labels");
  for (auto l : labels.data)
    if (l >= 10) throw Error(labels_path + ": label " + std::to_string(l) + " is not a class in [0, 10)");
  Dataset d;
  d.count = images.dims[0];
  d.pixels = std::size_t(images.dims[1]) * images.dims[2];
  d.images = std::move(images.data);
  d.labels = std::move(labels.data);
  return d;
}

}  // namespace idx
