#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/checkpoint/detail/settings.hpp is internal: include <cocod/checkpoint.hpp>"
#endif
// The settings a resumed run must share with the saved one, in a checkpoint's section
// "settings": each part's own (Options, the Update's, the algorithm's: Outer, Compress, ...),
// written from the one schema each settings type declares in its serialize(), and compared field
// by field on resume, so that a difference is refused naming the field and both values. An
// algorithm's checkpoint holds only the settings it takes.
#include <charconv>
#include <cstdio>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cocod/checkpoint/format.hpp"

namespace cocod::checkpoint::detail {

template <class V>
struct is_vector : std::false_type {};
template <class V, class A>
struct is_vector<std::vector<V, A>> : std::true_type {};

/// A setting's value as a message shows it (a number in the fewest digits that give it back
/// exactly: 0.7, not 0.69999999999999996).
template <class V>
std::string text(const V& v) {
  if constexpr (std::is_same_v<V, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<V, std::string>) {
    return v;
  } else if constexpr (std::is_floating_point_v<V>) {
    char b[64];
    const auto end = std::to_chars(b, b + sizeof b, v).ptr;
    return std::string(b, end);
  } else if constexpr (std::is_enum_v<V>) {
    if constexpr (requires { to_string(v); }) return to_string(v);
    else return std::to_string(static_cast<long long>(v));
  } else if constexpr (is_vector<V>::value) {
    std::string s = "{";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + text(v[i]);
    return s + "}";
  } else {
    return std::to_string(v);
  }
}

/// The schedule as a checkpoint compares it: what its describe() says (the learning-rate
/// schedule, and a measuring schedule's settings; a schedule without describe() is not
/// compared) and the run's length in steps (0 when it was not given: then any length fits).
struct ScheduleSettings {
  static constexpr const char* name = "Schedule";
  std::string type{};
  std::size_t total_steps = 0;
  template <class Archive>
  void serialize(Archive& a) {
    a("type", type);
    a("total_steps", total_steps);
  }
};
template <class Schedule>
ScheduleSettings schedule_settings(const Schedule& s, std::size_t total_steps) {
  ScheduleSettings out{"a schedule without describe(), not compared", total_steps};
  if constexpr (requires { s.describe(); }) out.type = s.describe();
  return out;
}

/// Runs `visit(name, setting)` over every settings part: the options, the update (when it says
/// what it holds), the schedule and each of the algorithm's settings.
template <class Options, class Update, class Settings, class Visit>
void each_setting(const Options& options, const Update& update, const ScheduleSettings& schedule, const Settings& settings,
                  Visit&& visit) {
  visit(options);
  if constexpr (requires(Update u, Visit& v) { u.serialize(v); }) visit(update);
  visit(schedule);
  std::apply([&](const auto&... s) { (visit(s), ...); }, settings);
}

template <class S>
const char* name_of() {
  if constexpr (requires { S::name; }) return S::name;
  else return "Update";
}

/// Writes the settings into a section, each field named "<part>::<field>".
class SettingsWriter {
 public:
  explicit SettingsWriter(FieldWriter& f) : f_(f) {}
  template <class S>
  void operator()(S s) {
    prefix_ = std::string(name_of<S>()) + "::";
    s.serialize(*this);
  }
  template <class S>
  void operator()(const std::optional<S>& s) {
    bool present = s.has_value();
    f_.value(name_of<S>(), present);
    (*this)(s.value_or(S{}));
  }
  template <class V>
  void operator()(std::string_view name, V& v) {
    if constexpr (is_vector<V>::value)
      f_.values(prefix_ + std::string(name), std::span<const typename V::value_type>(v));
    else if constexpr (std::is_same_v<V, std::string>)
      f_.text(prefix_ + std::string(name), v);
    else
      f_.value(prefix_ + std::string(name), v);
  }

 private:
  FieldWriter& f_;
  std::string prefix_;
};

/// A settings part as a message shows it: "{learning_rate 0.7, momentum 0.9, nesterov true}".
class SettingsText {
 public:
  template <class V>
  void operator()(std::string_view name, V& v) {
    text_ += (text_.empty() ? "{" : ", ") + std::string(name) + " " + text(v);
  }
  [[nodiscard]] std::string str() const { return text_.empty() ? "{}" : text_ + "}"; }

 private:
  std::string text_;
};

/// Compares the saved settings with this run's, field by field: the first that differs is a
/// CheckpointError naming the file, the field and both values. Fields in `ignore` may differ.
class SettingsCompare {
 public:
  /// Fields in `ignore` may differ; in `unknown_if_zero`, 0 on either side means "not given" and fits any value.
  SettingsCompare(const FileReader& file, FieldReader& f, std::set<std::string> ignore, std::set<std::string> unknown_if_zero = {})
      : file_(file), f_(f), ignore_(std::move(ignore)), unknown_if_zero_(std::move(unknown_if_zero)) {}
  template <class S>
  void operator()(S s) {
    prefix_ = std::string(name_of<S>()) + "::";
    const std::string_view next = f_.next_name();  // another part in its place: another update rule
    const auto part = next.rfind("::");
    if (part != std::string_view::npos && !next.starts_with(prefix_) && describe(s) != "{}")
      file_.fail("does not fit this run: the checkpoint's run has " + std::string(next.substr(0, part)) + " where this run has " +
                 name_of<S>());
    s.serialize(*this);
  }
  template <class S>
  void operator()(const std::optional<S>& s) {
    const bool saved = f_.value<bool>(name_of<S>());
    S got = s.value_or(S{});
    prefix_ = std::string(name_of<S>()) + "::";
    mode_ = saved == s.has_value() && saved ? Mode::compare : Mode::read;
    got.serialize(*this);
    mode_ = Mode::compare;
    if (saved != s.has_value())
      file_.fail("does not fit this run: " + std::string(name_of<S>()) + " differs (checkpoint: " + (saved ? describe(got) : "none") +
                 ", this run: " + (s ? describe(*s) : "none") + ")");
  }
  template <class V>
  void operator()(std::string_view name, V& v) {
    const std::string field = prefix_ + std::string(name);
    V saved{};
    if constexpr (is_vector<V>::value) {
      saved = f_.values<typename V::value_type>(field);
    } else if constexpr (std::is_same_v<V, std::string>) {
      const auto b = f_.bytes(field);
      saved.assign(reinterpret_cast<const char*>(b.data()), b.size());
    } else {
      saved = f_.value<V>(field);
    }
    if (mode_ == Mode::read) v = saved;
    if (mode_ == Mode::read || ignore_.count(field) || saved == v) return;
    if constexpr (std::is_arithmetic_v<V>)
      if (unknown_if_zero_.count(field) && (saved == V(0) || v == V(0))) return;
    file_.fail("does not fit this run: " + field + " differs (checkpoint: " + text(saved) + ", this run: " + text(v) + ")");
  }

 private:
  template <class S>
  static std::string describe(S s) {
    SettingsText t;
    s.serialize(t);
    return t.str();
  }
  const FileReader& file_;
  FieldReader& f_;
  std::set<std::string> ignore_, unknown_if_zero_;
  std::string prefix_;
  enum class Mode { compare, read } mode_ = Mode::compare;  // read: take the saved values (to describe them)
};

}  // namespace cocod::checkpoint::detail
