// Writes the seed corpora of the fuzz targets: checkpoints saved by each algorithm from the run
// of fuzz_run.hpp (so that fuzz_checkpoint_resume accepts them and mutations start deep inside
// the sections), the same wrapped in the resume target's other input forms, small IDX files,
// requests to the elastic coordinator, and for each a few bad variants that must be refused. Seeds are small on purpose: libFuzzer
// mutates short inputs much faster, and the committed corpus stays a few KB.
//   make_corpus OUT_DIR      (writes OUT_DIR/checkpoint, OUT_DIR/resume, OUT_DIR/idx, OUT_DIR/coordinator)
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "fuzz_run.hpp"

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

void write(const fs::path& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!out) throw std::runtime_error("make_corpus: cannot write " + path.string());
}
Bytes read(const fs::path& path) {
  const auto data = cocod::Checkpoints::read_bytes(path);
  Bytes b(data.size());
  std::memcpy(b.data(), data.data(), data.size());
  return b;
}
Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }
Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- checkpoints ---------------------------------------------------------------------------

/// The files of one algorithm's run, saved before its first step and after each of `rounds`.
template <class Opt>
std::map<std::size_t, Bytes> saved(const fs::path& scratch, std::size_t rounds = 2) {
  fs::remove_all(scratch);
  const cocod::Checkpoints store(scratch, rounds + 1);
  auto model = cocod_fuzz::model();
  Opt opt{cocod_fuzz::Comm{}, cocod_fuzz::options(), cocod_fuzz::sgd()};
  opt.begin(model, cocod::Steps{cocod_fuzz::total_steps});
  opt.save(model, store);
  for (std::size_t r = 0; r < rounds; ++r) {
    do opt.step(model, opt.next_batch());
    while (!opt.round_ended());
    opt.save(model, store);
  }
  opt.finish(model);
  std::map<std::size_t, Bytes> out;
  for (const std::size_t round : store.rounds()) out[round] = read(store.folder(round) / cocod::Checkpoints::file_name(0));
  fs::remove_all(scratch);
  return out;
}

/// The section boundaries of a well-formed file: (offset of the name length, name).
std::vector<std::pair<std::size_t, std::string>> sections(const Bytes& f) {
  std::vector<std::pair<std::size_t, std::string>> out;
  std::size_t at = 12;
  while (at + 4 <= f.size()) {
    std::uint32_t n = 0;
    std::uint64_t size = 0;
    std::memcpy(&n, &f[at], 4);
    const std::string name(reinterpret_cast<const char*>(&f[at + 4]), n);
    std::memcpy(&size, &f[at + 4 + n], 8);
    out.emplace_back(at, name);
    at += 4 + n + 8 + size + 4;
  }
  return out;
}
std::size_t section_at(const Bytes& f, const std::string& name) {
  for (const auto& [at, n] : sections(f))
    if (n == name) return at;
  throw std::runtime_error("make_corpus: no section " + name);
}
/// Recomputes every section's checksum, so that a deliberate change inside a payload is what a
/// reader refuses, not the checksum it broke.
void fix_checksums(Bytes& f) {
  for (const auto& [at, name] : sections(f)) {
    std::uint64_t size = 0;
    std::memcpy(&size, &f[at + 4 + name.size()], 8);
    const auto payload = std::as_bytes(std::span<const std::uint8_t>(&f[at + 4 + name.size() + 8], size));
    const std::uint32_t crc = cocod::checkpoint::crc32(payload, cocod::checkpoint::crc32(name));
    std::memcpy(&f[at + 4 + name.size() + 8 + size], &crc, 4);
  }
}

/// Sets the value of `field` in `section` (of the same size), checksums recomputed: a state
/// the checks of a part's serialize() must refuse.
Bytes with_field(Bytes f, const std::string& section, const std::string& field, const Bytes& value) {
  const std::size_t at = section_at(f, section) + 4 + section.size();
  std::uint64_t size = 0;
  std::memcpy(&size, &f[at], 8);
  for (std::size_t p = at + 8, end = at + 8 + size; p < end;) {
    std::uint32_t n = 0;
    std::uint64_t bytes = 0;
    std::memcpy(&n, &f[p], 4);
    std::memcpy(&bytes, &f[p + 4 + n], 8);
    if (std::string(reinterpret_cast<const char*>(&f[p + 4]), n) == field) {
      if (bytes != value.size())
        throw std::runtime_error("make_corpus: " + section + "." + field + " has " + std::to_string(bytes) + " bytes");
      std::copy(value.begin(), value.end(), f.begin() + static_cast<long>(p + 4 + n + 8));
      fix_checksums(f);
      return f;
    }
    p += 4 + n + 8 + bytes;
  }
  throw std::runtime_error("make_corpus: no field " + section + "." + field);
}
Bytes fixup_form(Bytes f) {
  f[0] = 'C';
  return f;
}

const std::string version_text = std::to_string(cocod::checkpoint::format_version);
std::string manifest(const std::string& algorithm, std::size_t round, std::size_t step, const std::string& workers = "1",
                     const std::string& version = version_text) {
  // @size and @crc: fuzz_checkpoint_resume puts the file's own there, so that mutations of
  // the other lines get past the manifest's checks of the file.
  std::string m = "cocod-checkpoint " + version + "\nalgorithm " + algorithm + "\nround " + std::to_string(round) +
                  "\nstep " + std::to_string(step) + "\nworkers " + workers + "\n";
  for (int r = 0; r < std::stoi(workers); ++r) m += "file " + cocod::Checkpoints::file_name(r) + " @size @crc\n";
  return m;
}
/// The resume target's manifest form: a byte with the manifest's length, the manifest, the file.
Bytes with_manifest(std::string m, const Bytes& file) {
  if (m.size() == 'c' || m.size() == 'C') m += "\n";  // those bytes pick the other forms; an empty last line is allowed
  if (m.size() > 255) throw std::runtime_error("make_corpus: a manifest of " + std::to_string(m.size()) + " bytes");
  return Bytes{static_cast<std::uint8_t>(m.size())} + text(m) + file;
}

void checkpoints(const fs::path& out) {
  const fs::path dir = out / "checkpoint", resume = out / "resume";
  fs::create_directories(dir);
  fs::create_directories(resume);
  const fs::path scratch = fs::temp_directory_path() / "cocod-fuzz-make-corpus";
  using cocod_fuzz::Model, cocod_fuzz::Comm;
  struct Saved {
    std::string tag, name;
    std::map<std::size_t, Bytes> files;
    std::string exchange;  // the section of its exchange that the next round posts
  };
  const std::vector<Saved> all = {
      {"cocod", cocod::Optimizer<Model, Comm>::name, saved<cocod::Optimizer<Model, Comm>>(scratch), "exchange.send"},
      {"sync", cocod::SyncSGD<Model, Comm>::name, saved<cocod::SyncSGD<Model, Comm>>(scratch), "exchange.gradient"},
      {"local", cocod::LocalSGD<Model, Comm>::name, saved<cocod::LocalSGD<Model, Comm>>(scratch), "exchange.send"},
      {"pipe", cocod::PipeSGD<Model, Comm>::name, saved<cocod::PipeSGD<Model, Comm>>(scratch), "exchange.gradient.0"},
      {"delayed-diloco", cocod::DelayedDiLoCo<Model, Comm>::name, saved<cocod::DelayedDiLoCo<Model, Comm>>(scratch), "exchange.send"},
  };
  const std::size_t period = cocod_fuzz::options().period;
  for (const auto& s : all) {
    const Bytes& f = s.files.at(1);
    write(dir / ("ok-" + s.tag + "-round1.ckpt"), f);
    write(resume / ("fixup-" + s.tag + "-round1.in"), fixup_form(f));  // checksums recomputed by the target
    write(resume / ("manifest-" + s.tag + "-round1.in"), with_manifest(manifest(s.name, 1, period, "1"), f));
  }
  write(dir / "ok-cocod-round0.ckpt", all[0].files.at(0));
  write(dir / "ok-pipe-round2.ckpt", all[3].files.at(2));
  // The adaptive schedule: its window closes after round 3, the new plan waits after round 4.
  const auto adaptive = saved<cocod_fuzz::Adaptive>(scratch, 5);
  write(dir / "ok-cocod-adaptive-round4.ckpt", adaptive.at(4));
  write(dir / "ok-cocod-adaptive-round5.ckpt", adaptive.at(5));
  write(resume / "fixup-cocod-adaptive-round4.in", fixup_form(adaptive.at(4)));

  const Bytes& f = all[0].files.at(1);
  const std::string name = all[0].name;
  write(dir / "bad-empty.ckpt", {});
  write(dir / "bad-magic.ckpt", text("cocodckq") + Bytes(f.begin() + 8, f.end()));
  Bytes version = f;
  version[8] = 2;
  write(dir / "bad-version.ckpt", version);
  write(dir / "bad-truncated.ckpt", Bytes(f.begin(), f.begin() + static_cast<long>(f.size() / 2)));
  Bytes checksum = f;
  checksum[section_at(f, "parameters") + 4 + 10 + 8 + 4 + 1 + 8 + 3] ^= 0x10;  // inside x's first value
  write(dir / "bad-checksum.ckpt", checksum);
  write(dir / "bad-no-end.ckpt", Bytes(f.begin(), f.begin() + static_cast<long>(section_at(f, "end"))));
  write(dir / "bad-trailing.ckpt", f + text("xyz"));
  // Sections swapped, checksums intact: "settings" comes first.
  {
    const auto h = static_cast<long>(section_at(f, "header")), o = static_cast<long>(section_at(f, "settings")),
               a = static_cast<long>(section_at(f, "position"));
    write(dir / "bad-first-section.ckpt", Bytes(f.begin(), f.begin() + 12) + Bytes(f.begin() + o, f.begin() + a) +
                                              Bytes(f.begin() + h, f.begin() + o) + Bytes(f.begin() + a, f.end()));
  }
  // A field renamed inside the header ("workers" -> "wOrkers"), checksums recomputed.
  {
    Bytes b = f;
    const std::string key = "workers";
    const auto it = std::search(b.begin(), b.end(), key.begin(), key.end());
    it[1] = 'O';
    fix_checksums(b);
    write(dir / "bad-field-name.ckpt", b);
  }
  // A section name length beyond max_name.
  {
    Bytes b = f;
    b[section_at(f, "sampler")] = 200;
    write(dir / "bad-section-name.ckpt", b);
  }

  // States that passed every check once and broke the run after the resume: an exchange
  // restored in flight that the algorithm posts into next (a logic_error at the next step; for
  // Pipe-SGD after two steps exchange.gradient.1 holds the last gradient, exchange.gradient.0 is
  // next), a sampler's generator stuck at zero (the next shuffle never ended).
  for (const auto& s : all)
    write(resume / ("regress-" + s.tag + "-in-flight.in"),
          fixup_form(with_field(s.files.at(1), s.exchange, "completed", {1})));
  // CoCoD-SGD restored as if its next snapshot were posted already: the round's end waited for
  // a collective that was never posted (a logic_error).
  write(resume / "regress-cocod-needs-post.in", fixup_form(with_field(f, "algorithm", "needs_post", {0})));
  write(resume / "regress-rng-zero.in", fixup_form(with_field(f, "sampler", "rng", Bytes(32, 0))));
  // An exchange restored with a model part shorter than the model: the final average scaled
  // the whole model into it.
  for (const auto& s : all)
    write(resume / ("regress-" + s.tag + "-model-size.in"),
          fixup_form(with_field(s.files.at(1), s.exchange, "model_size", Bytes{1, 0, 0, 0, 0, 0, 0, 0})));
  // A closed measurement window waiting to be sent with a time per sample of 2e-314 s: its
  // speed overflowed, and the re-plan cast a NaN share to an integer.
  write(resume / "regress-adaptive-tiny-time.in",
        fixup_form(with_field(adaptive.at(4), "window", "ready_sample_s", Bytes{0, 0, 0, 0, 1, 0, 0, 0})));

  // Manifests that the store must refuse, and one that does not match the file's header.
  write(resume / "manifest-bad-version.in", with_manifest(manifest(name, 1, period, "1", std::to_string(cocod::checkpoint::format_version + 5)), f));
  write(resume / "manifest-bad-workers.in", with_manifest(manifest(name, 1, period, "2"), f));
  write(resume / "manifest-bad-round.in", with_manifest(manifest(name, 2, 2 * period, "1"), f));
  write(resume / "manifest-bad-extra.in", with_manifest(manifest(name, 1, period, "1") + "more\n", f));
  write(resume / "manifest-bad-crc.in",
        with_manifest("cocod-checkpoint " + version_text + "\nalgorithm " + name +
                          "\nround 1\nstep 2\nworkers 1\nfile worker-0.ckpt @size 0123456z\n", f));
}

// ---- IDX -----------------------------------------------------------------------------------

Bytes idx(std::vector<std::uint32_t> dims, std::size_t payload, std::uint8_t first) {
  Bytes b{0, 0, 8, static_cast<std::uint8_t>(dims.size())};
  for (const auto d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(d >> s));
  for (std::size_t i = 0; i < payload; ++i) b.push_back(static_cast<std::uint8_t>(first + i));
  return b;
}
Bytes gzip(const Bytes& in) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)  // 16: a gzip wrapper
    throw std::runtime_error("make_corpus: deflateInit2");
  Bytes out(deflateBound(&z, static_cast<uLong>(in.size())) + 32);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("make_corpus: deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  out[4] = out[5] = out[6] = out[7] = 0;  // no modification time: the same bytes on every run
  return out;
}

void idx_files(const fs::path& out) {
  const fs::path dir = out / "idx";
  fs::create_directories(dir);
  const Bytes images = idx({2, 2, 2}, 8, 10), labels = idx({2}, 2, 3);
  write(dir / "ok-images.idx", images);
  write(dir / "ok-labels.idx", labels);
  write(dir / "ok-images.idx.gz", gzip(images));
  write(dir / "ok-labels.idx.gz", gzip(labels));
  write(dir / "ok-empty-4d.idx", idx({0, 3, 1, 2}, 0, 0));
  Bytes magic = images;
  magic[2] = 0x0D;
  write(dir / "bad-magic.idx", magic);
  write(dir / "bad-short.idx", Bytes{0, 0, 8});
  write(dir / "bad-rank0.idx", Bytes{0, 0, 8, 0});
  write(dir / "bad-rank5.idx", idx({1, 1, 1, 1, 1}, 1, 0));
  write(dir / "bad-header.idx", Bytes{0, 0, 8, 3, 0, 0, 0, 2, 0, 0});
  write(dir / "bad-payload.idx", idx({2, 2, 2}, 7, 10));
  write(dir / "bad-overflow.idx", idx({65536, 65536, 65536, 65536}, 0, 0));
  const Bytes gz = gzip(images);
  write(dir / "bad-truncated.idx.gz", Bytes(gz.begin(), gz.begin() + static_cast<long>(gz.size() - 6)));
  Bytes corrupt = gz;
  for (std::size_t i = 10; i < corrupt.size() - 8; ++i) corrupt[i] ^= 0x5A;
  write(dir / "bad-corrupt.idx.gz", corrupt);
  Bytes crc = gz;
  crc[crc.size() - 6] ^= 1;
  write(dir / "bad-crc.idx.gz", crc);
}

// Requests to the coordinator (the first byte: 1 says hello first, 3 joins as a worker too).
Bytes request(char verb, const std::string& key, const std::string& value) {
  Bytes b{static_cast<std::uint8_t>(verb)};
  const auto field = [&](const std::string& s) {
    const auto n = static_cast<std::uint32_t>(s.size());
    b.insert(b.end(), reinterpret_cast<const std::uint8_t*>(&n), reinterpret_cast<const std::uint8_t*>(&n) + 4);
    b.insert(b.end(), s.begin(), s.end());
  };
  field(key);
  field(value);
  return b;
}
Bytes seed(std::uint8_t mode, std::initializer_list<Bytes> requests) {
  Bytes b{mode};
  for (const Bytes& r : requests) b.insert(b.end(), r.begin(), r.end());
  return b;
}
void coordinator_requests(const fs::path& out) {
  const fs::path dir = out / "coordinator";
  fs::create_directories(dir);
  const std::string one("\1\0\0\0\0\0\0\0", 8), hour("\x80\xee\x36\0\0\0\0\0", 8);
  write(dir / "hello.in", seed(0, {request('H', "cocod-store/2", "fuzz-token")}));
  write(dir / "hello-wrong-token.in", seed(0, {request('H', "cocod-store/2", "fuzz-tokeN")}));
  write(dir / "join.in", seed(1, {request('A', "elastic/next_id", one), request('C', "elastic/worker/1", std::string(32, 'x')),
                                  request('A', "elastic/worker/1/beat", one)}));
  write(dir / "wait-not-a-number.in", seed(1, {request('W', "soon", std::string("k\0", 2))}));
  write(dir / "get-an-hour.in", seed(1, {request('G', "elastic/never", hour)}));
  write(dir / "member-writes.in", seed(3, {request('S', "elastic/epoch/1/held/1", "v 3:step24 4:step32"),
                                           request('S', "elastic/epoch/1/switch", "1"), request('S', "elastic/worker/1/leaving", "now"),
                                           request('S', "elastic/epoch/1/gloo/rank_0", "addr"), request('T', "elastic/epoch", "")}));
  write(dir / "outsider-writes.in", seed(1, {request('S', "elastic/worker/2/expelled", "x"), request('S', "elastic/finished", "1"),
                                             request('A', "elastic/next_id", std::string("\0\xca\x9a\x3b\0\0\0\0", 8))}));
  write(dir / "long-length.in", seed(1, {Bytes{'S', 3, 0, 0, 0, 'k', 'e', 'y', 0, 0, 0, 4}}));
  write(dir / "held-text.in", seed(0, {text("v 3:step24 4:step32")}));
  write(dir / "start-text.in", seed(0, {text("round 12 donor 3")}));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_corpus OUT_DIR\n";
    return 2;
  }
  try {
    checkpoints(argv[1]);
    idx_files(argv[1]);
    coordinator_requests(argv[1]);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
