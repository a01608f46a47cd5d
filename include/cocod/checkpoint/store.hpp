#pragma once
// Where checkpoints live: a directory with one folder per checkpoint, round-<12 digits>/, that
// holds one file per worker (worker-<rank>.ckpt) and, once every worker's file is written, a
// MANIFEST naming them with their sizes and checksums (manifest.hpp). A folder without a
// manifest is a checkpoint that was never completed (a crash while it was written) and is never
// read. Every file is written atomically (files.hpp), so a crash at any moment leaves the
// previous checkpoint whole.
#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cocod/checkpoint/files.hpp"
#include "cocod/checkpoint/format.hpp"
#include "cocod/checkpoint/manifest.hpp"
#include "cocod/errors.hpp"

namespace cocod {
namespace checkpoint {

/// A directory of checkpoints, of which the newest `keep` complete ones are kept. Every worker
/// of a run names the same directory (a shared file system when workers are processes on
/// several machines). Trainers write through it (save(), callbacks::Checkpoint) and read from
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
  [[nodiscard]] static std::string file_name(int rank) { return checkpoint::file_name(rank); }

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

  /// Reads and checks a folder's manifest: CheckpointError naming it and what is wrong.
  [[nodiscard]] static CheckpointInfo read_manifest(const std::filesystem::path& folder) { return checkpoint::read_manifest(folder); }

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
  static std::vector<std::byte> read_bytes(const std::filesystem::path& path) { return checkpoint::read_bytes(path); }
  /// Writes `data` to `path` atomically (files.hpp); CheckpointError naming the file and the reason.
  static void write_atomically(const std::filesystem::path& path, std::span<const std::byte> data) {
    checkpoint::write_atomically(path, data);
  }
  /// Creates the folder of a checkpoint (and the directory).
  static void make_folder(const std::filesystem::path& folder) { checkpoint::make_folder(folder); }

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
    const std::string text = manifest_text(info);
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
  std::filesystem::path dir_;
  std::size_t keep_;
};

}  // namespace checkpoint

using checkpoint::CheckpointInfo;
using checkpoint::Checkpoints;

}  // namespace cocod
