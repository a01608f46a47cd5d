#pragma once
// A checkpoint's manifest: the file rank 0 writes last into a checkpoint's folder, naming every
// worker's file with its size and CRC-32. A folder without one is a checkpoint that was never
// completed (a crash while it was written) and is never read.
#include <charconv>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "cocod/checkpoint/format.hpp"
#include "cocod/errors.hpp"

namespace cocod::checkpoint {

/// The name of rank `rank`'s file in a checkpoint's folder.
[[nodiscard]] inline std::string file_name(int rank) { return "worker-" + std::to_string(rank) + ".ckpt"; }

/// One complete checkpoint as its manifest describes it.
struct CheckpointInfo {
  std::filesystem::path folder;  ///< the folder round-NNNNNNNNNNNN in the directory
  std::string algorithm;         ///< the algorithm that wrote it
  std::size_t round = 0;         ///< rounds completed when it was taken
  std::size_t step = 0;          ///< steps taken when it was taken
  int workers = 0;               ///< workers that wrote it, one file each
  struct File {
    std::string name;            ///< worker-R.ckpt, R the rank
    std::uint64_t size = 0;      ///< bytes
    std::uint32_t crc = 0;       ///< CRC-32 of the whole file
  };
  std::vector<File> files;       ///< indexed by rank
  [[nodiscard]] std::filesystem::path file(int rank) const { return folder / files[static_cast<std::size_t>(rank)].name; }
};

/// Reads and checks a manifest: CheckpointError naming it and what is wrong.
[[nodiscard]] inline CheckpointInfo read_manifest(const std::filesystem::path& folder) {
  const auto path = folder / "MANIFEST";
  std::ifstream in(path);
  auto fail = [&](const std::string& what) -> CheckpointError {
    return CheckpointError("cocod: checkpoint manifest " + path.string() + " " + what);
  };
  if (!in) throw fail("cannot be read: " + std::string(std::strerror(errno)));
  CheckpointInfo info;
  info.folder = folder;
  std::string line, key;
  auto expect = [&](const char* name) -> std::istringstream {
    if (!std::getline(in, line)) throw fail(std::string("ends before its '") + name + "' line");
    std::istringstream s(line);
    if (!(s >> key) || key != name) throw fail(std::string("has '") + line + "' where the '" + name + "' line belongs");
    return s;
  };
  {
    auto s = expect("cocod-checkpoint");
    std::uint32_t version = 0;
    if (!(s >> version) || version != checkpoint::format_version) {
      const std::size_t from = line.find_first_not_of(' ', key.size());
      throw fail("has format version '" + (from == std::string::npos ? std::string{} : line.substr(from)) +
                 "'; this build reads version " + std::to_string(checkpoint::format_version));
    }
  }
  {
    auto s = expect("algorithm");
    std::getline(s >> std::ws, info.algorithm);
  }
  auto number = [&](const char* name, auto& v) {
    auto s = expect(name);
    if (!(s >> v)) throw fail(std::string("has a bad '") + name + "' line: '" + line + "'");
  };
  number("round", info.round);
  number("step", info.step);
  number("workers", info.workers);
  if (info.workers < 1 || info.workers > (1 << 20)) throw fail("names " + std::to_string(info.workers) + " workers");
  for (int r = 0; r < info.workers; ++r) {
    auto s = expect("file");
    CheckpointInfo::File f;
    std::string crc;
    if (!(s >> f.name >> f.size >> crc) || f.name != file_name(r) || crc.size() != 8)
      throw fail("has a bad line for worker " + std::to_string(r) + ": '" + line + "'");
    const auto [end, ec] = std::from_chars(crc.data(), crc.data() + crc.size(), f.crc, 16);
    if (ec != std::errc{} || end != crc.data() + crc.size()) throw fail("has a bad checksum for worker " + std::to_string(r) + ": '" + crc + "'");
    info.files.push_back(std::move(f));
  }
  if (std::getline(in, line) && !line.empty()) throw fail("has an extra line: '" + line + "'");
  return info;
}

/// The manifest of `info`, as read_manifest() reads it.
[[nodiscard]] inline std::string manifest_text(const CheckpointInfo& info) {
  std::ostringstream m;
  m << "cocod-checkpoint " << format_version << "\nalgorithm " << info.algorithm << "\nround " << info.round
    << "\nstep " << info.step << "\nworkers " << info.workers << "\n";
  for (const auto& f : info.files) {
    char crc[16];
    std::snprintf(crc, sizeof crc, "%08x", f.crc);
    m << "file " << f.name << " " << f.size << " " << crc << "\n";
  }
  return m.str();
}

}  // namespace cocod::checkpoint
