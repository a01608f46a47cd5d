#pragma once
// The file system's side of checkpoints (POSIX): whole files read and written atomically, to a
// temporary name, flushed to the disk (fsync), then renamed, and the folder synced, so that a
// crash at any moment leaves the previous file whole. Opt-in with <cocod/checkpoint.hpp>.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "cocod/errors.hpp"

namespace cocod::checkpoint {

/// Syncs a folder's entries to the disk (a rename in it becomes durable); errors are ignored,
/// since the rename itself is atomic.
inline void sync_folder(const std::filesystem::path& folder) noexcept {
  const int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename itself is atomic; syncing the folder makes it durable
  ::fsync(fd);
  ::close(fd);
}

/// Reads a file's bytes; CheckpointError naming it when it cannot be read.
inline std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
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
inline void write_atomically(const std::filesystem::path& path, std::span<const std::byte> data) {
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
inline void make_folder(const std::filesystem::path& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw CheckpointError("cocod: checkpoint folder " + folder.string() + " cannot be created: " + ec.message());
}

}  // namespace cocod::checkpoint
