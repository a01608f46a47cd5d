// libFuzzer target: the checkpoint format's readers on arbitrary bytes. FileReader splits the
// file into checked sections, read_header decodes the fixed one, and every
// section is walked field by field with each kind of read a part's serialize() can make. A
// refusal must be a CheckpointError naming the file (and, for a field, its section); any other
// exception, or an accepted file that does not hold what was read from it, is a finding.
#include <cocod/checkpoint/format.hpp>
#include <cocod/checkpoint/header.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <typeinfo>
#include <vector>

#include "fuzz_common.hpp"

namespace {

namespace ckpt = cocod::checkpoint;
using cocod::CheckpointError;
using cocod_fuzz::check_refusal;
using cocod_fuzz::finding;

const std::string file = "fuzz-input.ckpt";
const std::string prefix = "cocod: checkpoint " + file;

/// The names of a payload's fields as the format lays them out, read without the reader's
/// checks: what a walk asks for, so that it gets past the first field of every section.
std::vector<std::string> field_names(std::span<const std::byte> p) {
  std::vector<std::string> names;
  while (p.size() >= 4) {
    std::uint32_t n = 0;
    std::memcpy(&n, p.data(), 4);
    if (n > p.size() - 4) break;
    names.emplace_back(reinterpret_cast<const char*>(p.data() + 4), n);
    p = p.subspan(4 + n);
    if (p.size() < 8) break;
    std::uint64_t size = 0;
    std::memcpy(&size, p.data(), 8);
    p = p.subspan(8);
    if (size > p.size()) break;
    p = p.subspan(static_cast<std::size_t>(size));
  }
  return names;
}

/// Reads every field of section `s` with `read`, then finish(); a refusal must name the section.
template <class Read>
void walk(const ckpt::FileReader::Section& s, const std::vector<std::string>& names, Read&& read) {
  ckpt::FieldReader f(s.payload, file, s.name);
  try {
    for (const auto& n : names) read(f, n);
    f.finish();
  } catch (const CheckpointError& e) {
    check_refusal(e, "cocod: checkpoint " + file + ": section '" + s.name + "'", "a field's CheckpointError");
  }
}

void walk_section(const ckpt::FileReader::Section& s) {
  const auto names = field_names(s.payload);
  walk(s, names, [](ckpt::FieldReader& f, const std::string& n) { (void)f.bytes(n); });
  walk(s, names, [](ckpt::FieldReader& f, const std::string& n) { (void)f.value<bool>(n); });
  walk(s, names, [](ckpt::FieldReader& f, const std::string& n) { (void)f.value<std::uint8_t>(n); });
  walk(s, names, [](ckpt::FieldReader& f, const std::string& n) { (void)f.value<std::uint32_t>(n); });
  walk(s, names, [](ckpt::FieldReader& f, const std::string& n) { (void)f.value<std::uint64_t>(n); });
  walk(s, names, [](ckpt::FieldReader& f, const std::string& n) { (void)f.value<double>(n); });
  walk(s, names, [](ckpt::FieldReader& f, const std::string& n) { (void)f.values<double>(n); });
  walk(s, names, [](ckpt::FieldReader& f, const std::string& n) { (void)f.values<float>(n, 3); });
  walk(s, names, [](ckpt::FieldReader& f, const std::string& n) { (void)f.values<std::size_t>(n); });
  walk(s, names, [](ckpt::FieldReader& f, const std::string& n) { (void)f.text(n); });
  // A field asked for by another name than the one it has.
  walk(s, names, [](ckpt::FieldReader& f, const std::string& n) { (void)f.bytes(n + "?"); });
  // One field more than the section holds.
  walk(s, {""}, [&names](ckpt::FieldReader& f, const std::string&) {
    for (const auto& n : names) (void)f.bytes(n);
    (void)f.bytes("beyond");
  });
}

/// An accepted file holds exactly its sections: written again, they give back the input (but
/// for a payload in its "end" section, which a reader may ignore).
void check_round_trip(std::span<const std::byte> in, const ckpt::FileReader& r) {
  if (r.sections().empty() || r.sections().front().name != "header") finding("a file accepted without 'header' first");
  ckpt::FileWriter w;
  for (const auto& s : r.sections()) {
    if (s.name.empty() || s.name.size() > ckpt::max_name || s.name == "end")
      finding("a section accepted with the name '" + s.name + "'");
    if (s.payload.data() < in.data() || s.payload.data() + s.payload.size() > in.data() + in.size())
      finding("section '" + s.name + "' points outside the file");
    w.section(s.name, s.payload);
  }
  const auto out = std::move(w).finish();
  if (out.size() == in.size() && std::memcmp(out.data(), in.data(), in.size()) == 0) return;
  constexpr std::size_t empty_end = 4 + 3 + 8 + 4;
  const std::size_t body = out.size() - empty_end;
  if (in.size() <= out.size() || std::memcmp(out.data(), in.data(), body + 4 + 3) != 0)
    finding("the sections of an accepted file do not give back the file");
}

void read(std::span<const std::byte> in) {
  try {
    const ckpt::FileReader r(in, file);
    check_round_trip(in, r);
    for (const auto& s : r.sections()) walk_section(s);
    try {
      const ckpt::Header h = ckpt::read_header(r);
      // The same run fits; a run of another parameter count never does, whatever the workers.
      try {
        ckpt::check_fits(r, h, h, false);
      } catch (const CheckpointError& e) {
        finding(std::string("check_fits refused the run that the header describes: ") + e.what());
      }
      ckpt::Header other = h;
      other.parameters = h.parameters + 1;
      other.workers = h.workers + 1;
      try {
        ckpt::check_fits(r, h, other, true);
        finding("check_fits accepted a run with another parameter count");
      } catch (const CheckpointError& e) {
        check_refusal(e, prefix, "check_fits's CheckpointError");
      }
    } catch (const CheckpointError& e) {
      check_refusal(e, prefix, "read_header's CheckpointError");
    }
    try {
      (void)r.fields("no such section");
      finding("fields() found a section that cannot be there");
    } catch (const CheckpointError& e) {
      check_refusal(e, prefix, "fields()'s CheckpointError");
    }
  } catch (const CheckpointError& e) {
    check_refusal(e, prefix, "FileReader's CheckpointError");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    read(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size));
  } catch (const std::exception& e) {
    finding(std::string("an exception other than CheckpointError: ") + typeid(e).name() + ": " + e.what());
  }
  return 0;
}
