#pragma once
// The shared secret of a run whose processes meet through a rendezvous store (comm::Gloo's
// store, an elastic run's coordinator): every client presents it, and the store disconnects a
// client that does not. Where it comes from, for a program: a file (only its owner should read
// it), or the environment variable COCOD_TOKEN.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace cocod::rendezvous {

/// The most bytes a token may have.
inline constexpr std::size_t kMaxTokenBytes = 4096;

/// The run's token: the contents of `file` when one is named (a final newline dropped), else
/// the environment variable COCOD_TOKEN, else empty (no token). Throws std::invalid_argument
/// naming the file when it cannot be read, is empty or is over kMaxTokenBytes.
[[nodiscard]] inline std::string run_token(const std::string& file = {}) {
  if (file.empty()) {
    const char* env = std::getenv("COCOD_TOKEN");
    return env ? std::string(env).substr(0, kMaxTokenBytes) : std::string();
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::invalid_argument("the token file '" + file + "' cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty()) throw std::invalid_argument("the token file '" + file + "' is empty");
  if (token.size() > kMaxTokenBytes)
    throw std::invalid_argument("the token file '" + file + "' holds over " + std::to_string(kMaxTokenBytes) + " bytes");
  return token;
}

}  // namespace cocod::rendezvous

namespace cocod::comm {  // (the names of earlier versions)
using rendezvous::kMaxTokenBytes;
using rendezvous::run_token;
}  // namespace cocod::comm
