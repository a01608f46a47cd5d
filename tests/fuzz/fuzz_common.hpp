#pragma once
// What the fuzz targets share: how a finding ends the run, and the rule every refusal follows.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>

namespace cocod_fuzz {

/// Ends the run so that libFuzzer reports the input as a crash and saves it: an exception that
/// escaped with the wrong type, or a message that does not say what it refuses, is a bug of the
/// reader just as a crash is.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "\n==== cocod fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// A refusal must name the file (`names`) and say what is wrong beyond that name. With
/// COCOD_FUZZ_SHOW set, every refusal is printed: to read what a given input is told.
inline void check_refusal(const std::exception& e, std::string_view names, const char* type) {
  const std::string_view m = e.what();
  static const bool show = std::getenv("COCOD_FUZZ_SHOW") != nullptr;
  if (show) std::fprintf(stderr, "refused (%s): %s\n", type, e.what());
  if (m.find(names) == std::string_view::npos || m.size() < names.size() + 12)
    finding(std::string(type) + " whose message does not name '" + std::string(names) + "' and the fault: '" +
            std::string(m) + "'");
}

/// A path of this process's own for what a target writes: under /dev/shm when there is one
/// (it is rewritten on every execution), else the temporary directory; removed at exit.
class Scratch {
 public:
  explicit Scratch(const char* name) {
    std::error_code ec;
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec) ? std::filesystem::path("/dev/shm")
                                                                                     : std::filesystem::temp_directory_path();
    path_ = base / (std::string(name) + "-" + std::to_string(::getpid()));
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace cocod_fuzz
