#pragma once
// Where checkpoints live: a directory with one folder per checkpoint, round-<12 digits>/, that
// holds one file per worker (worker-<rank>.ckpt) and, once every worker's file is written, a
// MANIFEST naming them with their sizes and checksums. A folder without a manifest is a
// checkpoint that was never completed (a crash while it was written) and is never read. Every
// file is written atomically: to a temporary name, flushed to the disk (fsync), then renamed,
// and the folder synced, so a crash at any moment leaves the previous checkpoint whole.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "cocod/checkpoint/format.hpp"
#include "cocod/errors.hpp"

namespace cocod {
namespace checkpoint {

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

/// A directory of checkpoints, of which the newest `keep` complete ones are kept. Every worker
/// of a run names the same directory (a shared file system when workers are processes on
/// several machines). Optimizers write through it (save(), callbacks::Checkpoint) and read from
/// it (resume()); it keeps no run state itself, so a copy refers to the same directory.
class Checkpoints {
 public:
  /// `keep` >= 1: complete checkpoints kept; older ones are removed after a new one completes.
  explicit Checkpoints(std::filesystem::path directory, std::size_t keep = 2) : dir_(std::move(directory)), keep_(keep) {
    if (keep_ == 0) invalid_setting("cocod::Checkpoints", "keep", "must be >= 1", keep_);
    if (dir_.empty()) invalid_setting("cocod::Checkpoints", "directory", "must not be empty", "\"\"");
  }

  [[nodiscard]] const std::filesystem::path& directory() const noexcept { return dir_; }
  [[nodiscard]] std::size_t keep() const noexcept { return keep_; }

  /// The folder of the checkpoint taken after `round` rounds.
  [[nodiscard]] std::filesystem::path folder(std::size_t round) const {
    char name[32];
    std::snprintf(name, sizeof name, "round-%012zu", round);
    return dir_ / name;
  }
  [[nodiscard]] static std::string file_name(int rank) { return "worker-" + std::to_string(rank) + ".ckpt"; }

  /// The newest complete checkpoint (one with a manifest), or none. A manifest that cannot be
  /// read is an error (CheckpointError naming it), not a reason to fall back silently.
  [[nodiscard]] std::optional<CheckpointInfo> latest() const {
    const auto all = complete();
    if (all.empty()) return std::nullopt;
    return read_manifest(all.back().second);
  }

  /// The rounds of the complete checkpoints, oldest first.
  [[nodiscard]] std::vector<std::size_t> rounds() const {
    std::vector<std::size_t> r;
    for (const auto& [round, folder] : complete()) r.push_back(round);
    return r;
  }

  /// Reads and checks a manifest: CheckpointError naming it and what is wrong.
  [[nodiscard]] static CheckpointInfo read_manifest(const std::filesystem::path& folder) {
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
      if (!(s >> version) || version != checkpoint::format_version)
        throw fail("has format version '" + line.substr(key.size()) + "'; this build reads version " + std::to_string(checkpoint::format_version));
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

  /// Checks that every file the manifest lists exists with the size it names.
  static void check_files(const CheckpointInfo& info) {
    for (int r = 0; r < info.workers; ++r) {
      const auto path = info.file(r);
      std::error_code ec;
      const auto size = std::filesystem::file_size(path, ec);
      if (ec)
        throw CheckpointError("cocod: checkpoint " + path.string() + " is missing (the manifest lists it): " + ec.message());
      const auto& f = info.files[static_cast<std::size_t>(r)];
      if (size != f.size)
        throw CheckpointError("cocod: checkpoint " + path.string() + " has " + std::to_string(size) +
                              " bytes; its manifest says " + std::to_string(f.size) + " (truncated or replaced)");
    }
  }

  /// Reads a whole file that the manifest lists, checking its size and checksum.
  static std::vector<std::byte> read_file(const CheckpointInfo& info, int rank) {
    const auto path = info.file(rank);
    std::vector<std::byte> data = read_bytes(path);
    const auto& f = info.files[static_cast<std::size_t>(rank)];
    if (data.size() != f.size)
      throw CheckpointError("cocod: checkpoint " + path.string() + " has " + std::to_string(data.size()) +
                            " bytes; its manifest says " + std::to_string(f.size) + " (truncated or replaced)");
    if (checkpoint::crc32(data) != f.crc)
      throw CheckpointError("cocod: checkpoint " + path.string() + " does not match the checksum in its manifest (corrupt or replaced)");
    return data;
  }

  /// Reads a file's bytes; CheckpointError naming it when it cannot be read.
  static std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw CheckpointError("cocod: checkpoint " + path.string() + " cannot be read: " + std::strerror(errno));
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw CheckpointError("cocod: checkpoint " + path.string() + " cannot be read: " + std::strerror(errno));
    std::vector<std::byte> data(bytes.size());
    if (!bytes.empty()) std::memcpy(data.data(), bytes.data(), bytes.size());
    return data;
  }

  /// Writes `data` to `path` atomically: a temporary file beside it, fsync, rename, fsync of the
  /// folder. Throws CheckpointError naming the file and the system's reason.
  static void write_atomically(const std::filesystem::path& path, std::span<const std::byte> data) {
    const auto tmp = path.string() + ".tmp";
    auto fail = [&](const char* what) {
      const int e = errno;
      throw CheckpointError("cocod: checkpoint " + path.string() + ": " + what + " failed: " + std::strerror(e));
    };
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail("creating the temporary file");
    const std::byte* p = data.data();
    std::size_t left = data.size();
    while (left > 0) {
      const ::ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int e = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        errno = e == 0 ? ENOSPC : e;
        fail("writing");
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      errno = e;
      fail("fsync");
    }
    if (::close(fd) != 0) {
      ::unlink(tmp.c_str());
      fail("closing");
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      const int e = errno;
      ::unlink(tmp.c_str());
      errno = e;
      fail("renaming the temporary file");
    }
    sync_folder(path.parent_path());
  }

  /// Creates the folder of a checkpoint (and the directory).
  static void make_folder(const std::filesystem::path& folder) {
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (ec) throw CheckpointError("cocod: checkpoint folder " + folder.string() + " cannot be created: " + ec.message());
  }

  /// Withdraws a folder's manifest, if it has one, before its files are replaced.
  static void retract(const std::filesystem::path& folder) {
    std::error_code ec;
    const auto manifest = folder / "MANIFEST";
    if (!std::filesystem::exists(manifest, ec)) return;
    if (!std::filesystem::remove(manifest, ec) && ec)
      throw CheckpointError("cocod: checkpoint manifest " + manifest.string() + " cannot be removed: " + ec.message());
    sync_folder(folder);
  }

  /// Completes a checkpoint: writes its manifest (atomically), then removes what is older than
  /// the newest `keep` complete checkpoints, and folders that were never completed before it.
  void commit(const CheckpointInfo& info) const {
    std::ostringstream m;
    m << "cocod-checkpoint " << checkpoint::format_version << "\nalgorithm " << info.algorithm << "\nround " << info.round
      << "\nstep " << info.step << "\nworkers " << info.workers << "\n";
    for (const auto& f : info.files) {
      char crc[16];
      std::snprintf(crc, sizeof crc, "%08x", f.crc);
      m << "file " << f.name << " " << f.size << " " << crc << "\n";
    }
    const std::string text = m.str();
    write_atomically(info.folder / "MANIFEST", std::as_bytes(std::span<const char>(text.data(), text.size())));
    prune(info.round);
  }

 private:
  // (round, folder) of every folder with a manifest, oldest first.
  [[nodiscard]] std::vector<std::pair<std::size_t, std::filesystem::path>> complete() const {
    auto all = folders();
    std::erase_if(all, [](const auto& f) { return !std::filesystem::exists(f.second / "MANIFEST"); });
    return all;
  }
  [[nodiscard]] std::vector<std::pair<std::size_t, std::filesystem::path>> folders() const {
    std::vector<std::pair<std::size_t, std::filesystem::path>> out;
    std::error_code ec;
    if (!std::filesystem::is_directory(dir_, ec)) return out;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.size() != 18 || name.rfind("round-", 0) != 0 || !entry.is_directory()) continue;
      std::size_t round = 0;
      const auto [end, e] = std::from_chars(name.data() + 6, name.data() + name.size(), round);
      if (e == std::errc{} && end == name.data() + name.size()) out.emplace_back(round, entry.path());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // Keeps the newest `keep` complete checkpoints up to `newest`; removes the older ones, folders
  // never completed, and any of a later round: those belong to a run that this one replaced
  // (resumed from an earlier checkpoint, or started anew), and must not be resumed instead of
  // it. Errors are ignored: the new checkpoint is complete whatever is left over.
  void prune(std::size_t newest) const noexcept {
    try {
      const auto all = folders();
      std::size_t kept = 0;
      for (auto it = all.rbegin(); it != all.rend(); ++it) {
        std::error_code ec;
        const bool whole = std::filesystem::exists(it->second / "MANIFEST", ec);
        if (it->first <= newest && whole && kept < keep_) {
          ++kept;
          continue;
        }
        if (whole) std::filesystem::remove(it->second / "MANIFEST", ec);  // incomplete first, then gone
        std::filesystem::remove_all(it->second, ec);
      }
    } catch (...) {
    }
  }
  static void sync_folder(const std::filesystem::path& folder) {
    const int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;  // the rename itself is atomic; syncing the folder makes it durable
    ::fsync(fd);
    ::close(fd);
  }

  std::filesystem::path dir_;
  std::size_t keep_;
};

}  // namespace checkpoint

using checkpoint::CheckpointInfo;
using checkpoint::Checkpoints;

}  // namespace cocod
