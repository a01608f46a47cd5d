#pragma once
// The binary format of one worker's checkpoint file: a magic, the format version, then named
// sections, each with its length and a CRC-32 of its name and payload, the first one "header"
// and the last one "end". A section's payload is a sequence of named fields. Reading checks
// every length against what is left of the file before it is used, so a truncated or corrupt
// file is refused with a message naming the file and what is wrong, never read past its end.
//
//     file    := magic[8] version:u32 section*
//     section := name_length:u32 name payload_length:u64 payload crc32(name payload):u32
//     payload := field*          field := name_length:u32 name size:u64 bytes
//
// Integers are little-endian; scalars are stored as the host writes them (IEEE 754).
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cocod/errors.hpp"

namespace cocod {
namespace checkpoint {

static_assert(std::endian::native == std::endian::little, "cocod checkpoints are written on little-endian hosts");

inline constexpr std::array<char, 8> magic = {'c', 'o', 'c', 'o', 'd', 'c', 'k', 'p'};
/// The version this build writes and reads.
inline constexpr std::uint32_t format_version = 6;  // 2: the family's state, bytes sent per round; 3: the spread of the measured all-reduce time;
                                                    // 4: the settings of every part field by field, the guard's section, exchanges by name,
                                                    //    CoCoD-SGD's overlap depth, the plan's hiding steps;
                                                    // 5: the schedule and the run's length, Options::data_fingerprint;
                                                    // 6: the progress through the data (the passes done, counted from a change of workers)
/// Names of sections and fields are short; a longer one means a corrupt file.
inline constexpr std::size_t max_name = 64;

/// CRC-32 (IEEE 802.3, as zlib's crc32), continued from `crc`; eight bytes a step (slicing by
/// eight: table k holds the CRC of a byte followed by k zero bytes).
[[nodiscard]] inline std::uint32_t crc32(std::span<const std::byte> data, std::uint32_t crc = 0) noexcept {
  static constexpr auto t = [] {
    std::array<std::array<std::uint32_t, 256>, 8> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (std::size_t k = 1; k < 8; ++k)
      for (std::size_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFFu];
    return t;
  }();
  crc = ~crc;
  const std::byte* p = data.data();
  std::size_t n = data.size();
  if constexpr (std::endian::native == std::endian::little) {
    for (; n >= 8; p += 8, n -= 8) {
      std::uint32_t lo = 0, hi = 0;
      std::memcpy(&lo, p, 4);
      std::memcpy(&hi, p + 4, 4);
      lo ^= crc;
      crc = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^ t[3][hi & 0xFFu] ^
            t[2][(hi >> 8) & 0xFFu] ^ t[1][(hi >> 16) & 0xFFu] ^ t[0][hi >> 24];
    }
  }
  for (; n > 0; ++p, --n) crc = t[0][(crc ^ static_cast<std::uint32_t>(*p)) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}
[[nodiscard]] inline std::uint32_t crc32(std::string_view s, std::uint32_t crc = 0) noexcept {
  return crc32(std::as_bytes(std::span<const char>(s.data(), s.size())), crc);
}

/// Bytes appended in order: what both writers below are made of.
class ByteWriter {
 protected:
  template <class I>
  void put(I v) {
    append(std::as_bytes(std::span<const I>(&v, 1)));
  }
  void append(std::span<const std::byte> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  std::vector<std::byte> out_;
};

/// The fields of one section, appended in order.
class FieldWriter : ByteWriter {
 public:
  /// A field of raw bytes.
  void bytes(std::string_view name, std::span<const std::byte> data) {
    put(static_cast<std::uint32_t>(name.size()));
    append(std::as_bytes(std::span<const char>(name.data(), name.size())));
    put(static_cast<std::uint64_t>(data.size()));
    append(data);
  }
  /// A field holding one trivially copyable value, or a span of them.
  template <class V>
    requires std::is_trivially_copyable_v<V>
  void value(std::string_view name, const V& v) {
    bytes(name, std::as_bytes(std::span<const V>(&v, 1)));
  }
  template <class V>
    requires std::is_trivially_copyable_v<V>
  void values(std::string_view name, std::span<const V> v) {
    bytes(name, std::as_bytes(v));
  }
  void text(std::string_view name, std::string_view s) {
    bytes(name, std::as_bytes(std::span<const char>(s.data(), s.size())));
  }
  [[nodiscard]] const std::vector<std::byte>& data() const noexcept { return out_; }

};

/// Reads the fields of one section in the order they were written; every mismatch (a name that
/// is not the one expected, a size that is not the one needed, a field past the section's end)
/// throws CheckpointError naming the file, the section and the field.
class FieldReader {
 public:
  FieldReader(std::span<const std::byte> payload, std::string file, std::string section)
      : in_(payload), file_(std::move(file)), section_(std::move(section)) {}

  /// The next field, which must be called `name`.
  std::span<const std::byte> bytes(std::string_view name) {
    const auto length = take<std::uint32_t>(name);
    if (length > max_name) fail(name, "has a field name of " + std::to_string(length) + " bytes (corrupt)");
    const auto got = need(length, name);
    const std::string_view found(reinterpret_cast<const char*>(got.data()), got.size());
    if (found != name) fail(name, "has field '" + std::string(found) + "' where '" + std::string(name) + "' belongs");
    const auto size = take<std::uint64_t>(name);
    return need(size, name);
  }
  /// The next field's name without reading it ("" at the section's end or where the name cannot be read).
  [[nodiscard]] std::string_view next_name() const {
    std::uint32_t length = 0;
    if (in_.size() < sizeof length) return {};
    std::memcpy(&length, in_.data(), sizeof length);
    if (length > max_name || in_.size() - sizeof length < length) return {};
    return {reinterpret_cast<const char*>(in_.data() + sizeof length), length};
  }
  template <class V>
    requires std::is_trivially_copyable_v<V>
  V value(std::string_view name) {
    const auto b = bytes(name);
    if constexpr (std::is_same_v<V, bool>) {  // one byte, 0 or 1: any other is no bool
      if (b.size() != 1 || (b[0] != std::byte{0} && b[0] != std::byte{1})) fail(name, "is not a boolean (corrupt)");
      return b[0] == std::byte{1};
    }
    if (b.size() != sizeof(V))
      fail(name, "has " + std::to_string(b.size()) + " bytes where " + std::to_string(sizeof(V)) + " belong");
    V v;
    std::memcpy(&v, b.data(), sizeof(V));
    return v;
  }
  /// A field of `expected` values (any count when expected is npos).
  template <class V>
    requires std::is_trivially_copyable_v<V>
  std::vector<V> values(std::string_view name, std::size_t expected = static_cast<std::size_t>(-1)) {
    const auto b = bytes(name);
    if (b.size() % sizeof(V) != 0) fail(name, "has " + std::to_string(b.size()) + " bytes, not whole values");
    const std::size_t count = b.size() / sizeof(V);
    if (expected != static_cast<std::size_t>(-1) && count != expected)
      fail(name, "holds " + std::to_string(count) + " values where " + std::to_string(expected) + " belong");
    std::vector<V> v(count);
    if (count > 0) std::memcpy(v.data(), b.data(), b.size());
    return v;
  }
  std::string text(std::string_view name) {
    const auto b = bytes(name);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  /// Throws unless every field was read.
  void finish() const {
    if (!in_.empty()) fail("", "has " + std::to_string(in_.size()) + " bytes after its last field");
  }
  [[noreturn]] void fail(std::string_view field, const std::string& what) const {
    throw CheckpointError("cocod: checkpoint " + file_ + ": section '" + section_ + "'" +
                          (field.empty() ? "" : " field '" + std::string(field) + "'") + " " + what);
  }

 private:
  template <class I>
  I take(std::string_view field) {
    const auto b = need(sizeof(I), field);
    I v;
    std::memcpy(&v, b.data(), sizeof(I));
    return v;
  }
  std::span<const std::byte> need(std::uint64_t n, std::string_view field) {
    if (n > in_.size()) fail(field, "ends early (needs " + std::to_string(n) + " bytes, " + std::to_string(in_.size()) + " left)");
    const auto b = in_.first(static_cast<std::size_t>(n));
    in_ = in_.subspan(static_cast<std::size_t>(n));
    return b;
  }
  std::span<const std::byte> in_;
  std::string file_, section_;
};

/// A whole file: sections appended in order, then finish() (which closes it with "end").
class FileWriter : ByteWriter {
 public:
  FileWriter() {
    std::array<std::byte, magic.size() + sizeof(format_version)> start{};  // the magic, then the version
    std::memcpy(start.data(), magic.data(), magic.size());
    std::memcpy(start.data() + magic.size(), &format_version, sizeof(format_version));
    out_.assign(start.begin(), start.end());
  }
  void section(std::string_view name, const FieldWriter& fields) { section(name, std::span(fields.data())); }
  void section(std::string_view name, std::span<const std::byte> payload) {
    put(static_cast<std::uint32_t>(name.size()));
    append(std::as_bytes(std::span<const char>(name.data(), name.size())));
    put(static_cast<std::uint64_t>(payload.size()));
    append(payload);
    put(crc32(payload, crc32(name)));
  }
  /// The file's bytes, closed by the "end" section.
  [[nodiscard]] std::vector<std::byte> finish() && {
    section("end", std::span<const std::byte>());
    return std::move(out_);
  }

};

/// The sections of a file, checked: the magic, the version, every length within the file, every
/// checksum, "header" first and "end" last with nothing after it. `file` names it in errors.
class FileReader {
 public:
  struct Section {
    std::string name;
    std::span<const std::byte> payload;
  };

  FileReader(std::span<const std::byte> data, std::string file) : file_(std::move(file)) {
    if (data.size() < magic.size() || std::memcmp(data.data(), magic.data(), magic.size()) != 0)
      fail("is not a cocod checkpoint (its first bytes are not the format's magic)");
    std::span<const std::byte> in = data.subspan(magic.size());
    const auto version = take<std::uint32_t>(in, "the format version");
    if (version != format_version)
      fail("has format version " + std::to_string(version) + "; this build reads version " +
           std::to_string(format_version));
    for (;;) {
      if (in.empty()) fail("is truncated: it ends before its 'end' section");
      const auto length = take<std::uint32_t>(in, "a section's name");
      if (length == 0 || length > max_name) fail("is corrupt: a section name of " + std::to_string(length) + " bytes");
      const auto name_bytes = need(in, length, "a section's name");
      Section s{std::string(reinterpret_cast<const char*>(name_bytes.data()), name_bytes.size()), {}};
      const auto size = take<std::uint64_t>(in, "section '" + s.name + "'");
      s.payload = need(in, size, "section '" + s.name + "'");
      const auto crc = take<std::uint32_t>(in, "section '" + s.name + "''s checksum");
      if (crc != crc32(s.payload, crc32(s.name)))
        fail("is corrupt: section '" + s.name + "' does not match its checksum");
      if (sections_.empty() && s.name != "header") fail("is corrupt: its first section is '" + s.name + "', not 'header'");
      if (s.name == "end") break;
      sections_.push_back(std::move(s));
    }
    if (!in.empty()) fail("is corrupt: " + std::to_string(in.size()) + " bytes follow its 'end' section");
  }

  /// The fields of section `name`; CheckpointError when the file has none.
  [[nodiscard]] FieldReader fields(std::string_view name) const {
    for (const auto& s : sections_)
      if (s.name == name) return FieldReader(s.payload, file_, s.name);
    fail("has no section '" + std::string(name) + "'");
  }
  [[nodiscard]] const std::vector<Section>& sections() const noexcept { return sections_; }
  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  [[noreturn]] void fail(const std::string& what) const { throw CheckpointError("cocod: checkpoint " + file_ + " " + what); }

 private:
  template <class I>
  I take(std::span<const std::byte>& in, const std::string& what) const {
    const auto b = need(in, sizeof(I), what);
    I v;
    std::memcpy(&v, b.data(), sizeof(I));
    return v;
  }
  std::span<const std::byte> need(std::span<const std::byte>& in, std::uint64_t n, const std::string& what) const {
    if (n > in.size()) fail("is truncated or corrupt: " + what + " needs " + std::to_string(n) + " bytes, " + std::to_string(in.size()) + " are left");
    const auto b = in.first(static_cast<std::size_t>(n));
    in = in.subspan(static_cast<std::size_t>(n));
    return b;
  }
  std::string file_;
  std::vector<Section> sections_;
};

}  // namespace checkpoint
}  // namespace cocod
