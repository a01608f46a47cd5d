#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/checkpoint/detail/archive.hpp is internal: include <cocod/checkpoint.hpp>"
#endif
// The two archives a run's parts are written to and read from: each part says once what it
// holds, in a `serialize(Archive& a)` that names its fields, a("anchor", anchor_), and the same
// function saves and restores it, so the two cannot drift apart. Fields are scalars and other
// trivially copyable values, vectors of them, strings, and backend buffers (copied through host
// memory on a device).
#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/backend/backend.hpp"
#include "cocod/backend/device_span.hpp"
#include "cocod/checkpoint/format.hpp"

namespace cocod::detail {

template <class V>
struct is_vector : std::false_type {};
template <class V, class A>
struct is_vector<std::vector<V, A>> : std::true_type {};
template <class V>
struct is_buffer : std::false_type {};
template <class B, class T>
struct is_buffer<backend::buffer<B, T>> : std::true_type {};

/// The values of a parameter-sized span in host memory: the span itself on the host; from a
/// device, a copy into `copy`.
template <class T>
std::span<const T> host_values(std::span<const T> s, std::vector<T>&) {
  return s;
}
template <class T>
std::span<const T> host_values(backend::device_span<const T> s, std::vector<T>& copy) {
  copy.resize(s.size());
  if (!copy.empty()) copy_to_host(s, copy.data());  // the device backend's, by argument-dependent lookup
  return copy;
}
template <class T>
void copy_in(std::span<T> to, const std::vector<T>& from) {
  std::copy(from.begin(), from.end(), to.begin());
}
template <class T>
void copy_in(backend::device_span<T> to, const std::vector<T>& from) {
  if (!from.empty()) copy_from_host(from.data(), to);
}
template <class S>
auto const_view(S s) {
  if constexpr (requires { typename S::element_type; } && std::is_same_v<S, std::span<typename S::element_type>>)
    return std::span<const typename S::element_type>(s);
  else
    return backend::device_span<const typename S::element_type>(s);
}

class SaveArchive {
 public:
  void begin(std::string_view section) {
    section_ = std::string(section);
    fields_ = checkpoint::FieldWriter{};
  }
  void end() { file_.section(section_, fields_); }

  template <class V>
  void operator()(std::string_view name, const V& v) {
    if constexpr (is_buffer<V>::value) {
      auto& b = const_cast<V&>(v);  // span() of a buffer is not const on every backend
      span(name, b.span());
    } else if constexpr (is_vector<V>::value) {
      fields_.values(name, std::span(v));
    } else if constexpr (std::is_same_v<V, std::string>) {
      fields_.text(name, v);
    } else {
      static_assert(std::is_trivially_copyable_v<V>, "cocod: a checkpointed field must be trivially copyable, a "
                                                     "vector of such values, a string or a backend buffer");
      fields_.value(name, v);
    }
  }
  /// A span of parameter-sized values in the model's memory.
  template <class S>
  void span(std::string_view name, S s) {
    std::vector<std::remove_const_t<typename S::element_type>> copy;  // (from a device only)
    fields_.values(name, host_values(const_view(s), copy));
  }
  void bytes(std::string_view name, std::span<const std::byte> b) { fields_.bytes(name, b); }

  [[nodiscard]] std::vector<std::byte> finish() && { return std::move(file_).finish(); }
  /// The file, for sections written without fields of a part (the header).
  [[nodiscard]] checkpoint::FileWriter& file() noexcept { return file_; }
  static constexpr bool saving = true;

 private:
  checkpoint::FileWriter file_;
  checkpoint::FieldWriter fields_;
  std::string section_;
};

class LoadArchive {
 public:
  explicit LoadArchive(const checkpoint::FileReader& file) : file_(file) {}

  void begin(std::string_view section) { fields_ = file_.fields(section); }
  void end() { fields_.finish(); }

  template <class V>
  void operator()(std::string_view name, V& v) {
    if constexpr (is_buffer<V>::value) {
      span(name, v.span());
    } else if constexpr (is_vector<V>::value) {
      v = fields_.template values<typename V::value_type>(name);
    } else if constexpr (std::is_same_v<V, std::string>) {
      v = fields_.text(name);
    } else {
      v = fields_.template value<V>(name);
    }
  }
  /// A span of parameter-sized values: the field must hold exactly s.size() values.
  template <class S>
  void span(std::string_view name, S s) {
    const auto host = fields_.template values<std::remove_const_t<typename S::element_type>>(name, s.size());
    copy_in(s, host);
  }
  std::span<const std::byte> bytes(std::string_view name) { return fields_.bytes(name); }
  /// Throws CheckpointError naming the file, the section and the field.
  [[noreturn]] void fail(std::string_view field, const std::string& what) const { fields_.fail(field, what); }

  static constexpr bool saving = false;

 private:
  const checkpoint::FileReader& file_;
  checkpoint::FieldReader fields_{{}, file_.file(), ""};  // the current section's
};

/// Runs part(a) inside section `name` of archive a.
template <class Archive, class Part>
void section(Archive& a, std::string_view name, Part&& part) {
  a.begin(name);
  part(a);
  a.end();
}

}  // namespace cocod::detail
