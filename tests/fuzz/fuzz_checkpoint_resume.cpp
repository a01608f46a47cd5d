// libFuzzer target: the whole resume path. The input becomes a checkpoint store (a round folder
// with worker-0.ckpt and a MANIFEST) and a one-worker run resumes from it with the algorithm
// its header names (CoCoD-SGD otherwise), momentum on, so that every section is loaded through
// the parts' serialize(); a resumed run then takes the steps to a round's end and finishes, so
// that a state the readers accepted is also one the run can go on from. The input's first byte
// picks its form:
//   'c'    the input is the file, and the manifest lists its true size and CRC-32: what is
//          exercised is the file's own checks;
//   'C'    the same with every section's checksum recomputed ('C' read as 'c'), so that
//          mutations inside a payload reach the field readers and serialize() members;
//   other  byte n: the next n bytes are the MANIFEST's text ("@size" and "@crc" in it replaced
//          by the file's), the rest is the file (also written as worker-1..3.ckpt, so that a
//          manifest naming more workers reaches the elastic resume, allowed for odd n).
// A refusal must be a CheckpointError naming the store; any other exception is a finding.
// With COCOD_FUZZ_REQUIRE_RESUME set, a refusal is a finding too: how the committed seeds are
// checked to still resume with the library as it is.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "fuzz_common.hpp"
#include "fuzz_run.hpp"

namespace {

namespace fs = std::filesystem;
namespace ckpt = cocod::checkpoint;
using cocod_fuzz::finding;

const fs::path& store_dir() {
  static const cocod_fuzz::Scratch dir("cocod-fuzz-resume");
  return dir.path();
}

void write(const fs::path& path, std::span<const std::byte> b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!out) finding("cannot write " + path.string());
}

/// Recomputes the checksum of every section that lies within the file, as far as they go.
void fix_checksums(std::vector<std::byte>& f) {
  std::size_t at = ckpt::magic.size() + 4;
  while (at <= f.size() && f.size() - at >= 4) {
    std::uint32_t n = 0;
    std::memcpy(&n, &f[at], 4);
    if (n > ckpt::max_name || f.size() - at - 4 < n + 8ull) return;
    const std::string_view name(reinterpret_cast<const char*>(&f[at + 4]), n);
    std::uint64_t size = 0;
    std::memcpy(&size, &f[at + 4 + n], 8);
    const std::size_t payload = at + 4 + n + 8;
    if (size > f.size() - payload || f.size() - payload - size < 4) return;
    const std::uint32_t crc = ckpt::crc32(std::span(f).subspan(payload, static_cast<std::size_t>(size)), ckpt::crc32(name));
    std::memcpy(&f[payload + size], &crc, 4);
    at = payload + static_cast<std::size_t>(size) + 4;
    if (name == "end") return;
  }
}

/// The header as far as it reads (the defaults when it does not): it names the algorithm and
/// where the file's round folder is, and fills the manifest written for it. A window section
/// with fields is one of a schedule that measures: the file is resumed by such a run.
struct Probe {
  ckpt::Header header{cocod::Optimizer<cocod_fuzz::Model, cocod_fuzz::Comm>::name, 8, 1, 0, 0, 0, 0, 0.0};
  bool adaptive = false;
};
Probe probe(std::span<const std::byte> file) {
  Probe p;
  try {
    const ckpt::FileReader r(file, "probe");
    for (const auto& s : r.sections())
      if (s.name == "window") p.adaptive = !s.payload.empty();
    p.header = ckpt::read_header(r);
  } catch (const cocod::CheckpointError&) {
  }
  return p;
}

std::string manifest_for(const ckpt::Header& h, std::span<const std::byte> file) {
  char line[96];
  std::snprintf(line, sizeof line, "file worker-0.ckpt %zu %08x\n", file.size(), ckpt::crc32(file));
  return "cocod-checkpoint " + std::to_string(ckpt::format_version) + "\nalgorithm " + h.algorithm + "\nround " +
         std::to_string(h.round) + "\nstep " + std::to_string(h.step) + "\nworkers 1\n" + line;
}
void replace_all(std::string& s, std::string_view what, const std::string& with) {
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size()))
    s.replace(at, what.size(), with);
}

void resume(std::span<const std::uint8_t> in) {
  if (in.empty()) return;
  std::vector<std::byte> file;
  std::string manifest;
  bool fuzzed_manifest = false;
  const auto bytes = [](std::span<const std::uint8_t> s) {
    const auto* b = reinterpret_cast<const std::byte*>(s.data());
    return std::vector<std::byte>(b, b + s.size());
  };
  if (in[0] == 'c' || in[0] == 'C') {
    file = bytes(in);
    file[0] = std::byte{'c'};
    if (in[0] == 'C') fix_checksums(file);
  } else {
    const std::size_t n = std::min<std::size_t>(in[0], in.size() - 1);
    manifest.assign(reinterpret_cast<const char*>(in.data() + 1), n);
    file = bytes(in.subspan(1 + n));
    fuzzed_manifest = true;
  }
  const Probe found = probe(file);
  const ckpt::Header& h = found.header;
  if (fuzzed_manifest) {
    char crc[16];
    std::snprintf(crc, sizeof crc, "%08x", ckpt::crc32(file));
    replace_all(manifest, "@size", std::to_string(file.size()));
    replace_all(manifest, "@crc", crc);
  } else {
    manifest = manifest_for(h, file);
  }

  const cocod::Checkpoints store(store_dir());
  std::error_code ec;
  fs::remove_all(store_dir(), ec);
  const fs::path folder = store.folder(static_cast<std::size_t>(h.round));
  fs::create_directories(folder);
  write(folder / cocod::Checkpoints::file_name(0), file);
  if (fuzzed_manifest)
    for (int r = 1; r < 4; ++r) write(folder / cocod::Checkpoints::file_name(r), file);
  write(folder / "MANIFEST", std::as_bytes(std::span<const char>(manifest.data(), manifest.size())));

  const cocod::ResumeOptions options{.workers_may_change = fuzzed_manifest && (in[0] & 1) != 0};
  cocod_fuzz::with_algorithm(h.algorithm, found.adaptive, [&]<class Opt>() {
    auto model = cocod_fuzz::model();
    Opt opt{cocod_fuzz::Comm{}, cocod_fuzz::options(), cocod_fuzz::sgd()};
    try {
      (void)opt.resume(model, store, cocod::Steps{cocod_fuzz::total_steps}, options);
    } catch (const cocod::CheckpointError& e) {
      if (std::getenv("COCOD_FUZZ_REQUIRE_RESUME")) finding(std::string("a seed that no longer resumes: ") + e.what());
      cocod_fuzz::check_refusal(e, store_dir().string(), "resume()'s CheckpointError");
      return;
    }
    // The run goes on from what was loaded: to the end of a round (a whole round's exchange),
    // then the consensus.
    try {
      for (std::size_t i = 0; i <= opt.info().period && opt.steps_taken() < opt.info().total_steps; ++i)
        (void)opt.step(model, opt.next_batch());
      (void)opt.finish(model);
    } catch (const cocod::DistributedError&) {
      // The run's own verdict on what it was given (a NaN or an infinity in the loaded
      // parameters, NonFiniteError), not a reader's.
    }
  });
}

/// The values of every field in a file's well-formed sections: (offset, size) in the input.
std::vector<std::pair<std::size_t, std::size_t>> field_values(const std::uint8_t* data, std::size_t size) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  auto u32 = [&](std::size_t at) { std::uint32_t v; std::memcpy(&v, data + at, 4); return v; };
  auto u64 = [&](std::size_t at) { std::uint64_t v; std::memcpy(&v, data + at, 8); return v; };
  std::size_t at = ckpt::magic.size() + 4;
  while (at <= size && size - at >= 4 + 8) {
    const std::uint32_t n = u32(at);
    if (n > ckpt::max_name || size - at - 4 - 8 < n) break;
    const std::uint64_t length = u64(at + 4 + n);
    const std::size_t begin = at + 4 + n + 8;
    if (length > size - begin) break;
    for (std::size_t f = begin, end = begin + static_cast<std::size_t>(length); end - f >= 4 + 8;) {
      const std::uint32_t m = u32(f);
      if (m > end - f - 4 - 8) break;
      const std::uint64_t bytes = u64(f + 4 + m);
      if (bytes > end - f - 4 - m - 8) break;
      if (bytes > 0) out.emplace_back(f + 4 + m + 8, static_cast<std::size_t>(bytes));
      f += 4 + m + 8 + static_cast<std::size_t>(bytes);
    }
    at = begin + static_cast<std::size_t>(length) + 4;
  }
  return out;
}

}  // namespace

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

/// Half of the mutations of a file change one field's value in place, its size kept: random
/// bytes would almost never leave the framing intact, so the loaded state (flags, counters, the
/// generator's state) would rarely differ from the seeds'. In the 'C' form the checksums are
/// recomputed, so such a value reaches serialize() as it is.
extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed) {
  if (size > 0 && (data[0] == 'C' || data[0] == 'c') && (seed & 1) != 0) {
    const auto fields = field_values(data, size);
    if (!fields.empty()) {
      const auto [at, n] = fields[(seed >> 1) % fields.size()];
      switch ((seed >> 16) % 4) {
        case 0:  // all zero: empty states, counters at 0, false
          std::memset(data + at, 0, n);
          break;
        case 1:  // one byte set to 0, 1 or 0xff: a flag or a small count
          data[at + (seed >> 8) % n] = static_cast<std::uint8_t>((seed >> 20) % 3 == 2 ? 0xff : (seed >> 20) % 3);
          break;
        default: {
          std::vector<std::uint8_t> value(data + at, data + at + n);
          const std::size_t kept = LLVMFuzzerMutate(value.data(), n, n);
          std::memcpy(data + at, value.data(), kept);
        }
      }
      return size;
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    resume(std::span<const std::uint8_t>(data, size));
  } catch (const std::exception& e) {
    finding(std::string("an exception other than CheckpointError: ") + typeid(e).name() + ": " + e.what());
  }
  return 0;
}
