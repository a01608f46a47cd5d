#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/rule_checks.hpp is internal: include <cocod.hpp>"
#endif
// The checks of an algorithm's hooks where a user names the algorithm: every hook is required
// (one with nothing to do is empty), so that a misspelt or missing one is a compile error that
// names it, never a silent default.
#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>

namespace cocod::detail {

/// The settings an algorithm takes (its `settings`, a std::tuple), none by default.
template <class Rule>
struct settings_of {
  using type = std::tuple<>;
};
template <class Rule>
  requires requires { typename Rule::settings; }
struct settings_of<Rule> {
  using type = typename Rule::settings;
};

/// A settings type's own: S for S and std::optional<S>.
template <class S>
struct setting_type {
  using type = S;
};
template <class S>
struct setting_type<std::optional<S>> {
  using type = S;
};

template <class Rule, class Ops>
struct RuleChecks {
  using Settings = typename settings_of<Rule>::type;
  using Span = typename Ops::span_type;
  using T = typename Ops::scalar_type;
  struct Archive {  // what a checkpoint's archives offer a serialize(): a("name", value)
    static constexpr bool saving = true;
    template <class V>
    void operator()(const char*, V&) {}
    template <class... A>
    void fail(A&&...) {}
  };
  static constexpr bool has_name = requires { { Rule::name } -> std::convertible_to<const char*>; };
  static constexpr bool has_begin = requires(Rule& r, Ops& o, Span x) { r.begin(o, x); };
  static constexpr bool has_step = requires(Rule& r, Ops& o, Span x, std::span<const std::size_t> batch, T lr) { r.step(o, x, batch, lr); };
  static constexpr bool has_end_round = requires(Rule& r, Ops& o, Span x) { r.end_round(o, x); };
  static constexpr bool has_finish = requires(Rule& r, Ops& o, Span x) { r.finish(o, x); };
  static constexpr bool has_serialize = requires(Rule& r, Archive& a) { r.serialize(a); };
  static constexpr bool constructible = std::tuple_size_v<Settings> == 0 ? std::is_default_constructible_v<Rule>
                                                                         : std::is_constructible_v<Rule, const Settings&>;
  template <class S>
  static constexpr bool described = requires(S& s, Archive& a) {
    { S::name } -> std::convertible_to<const char*>;
    s.serialize(a);
  };
  static constexpr bool settings_described = []<std::size_t... I>(std::index_sequence<I...>) {
    return (described<typename setting_type<std::tuple_element_t<I, Settings>>::type> && ...);
  }(std::make_index_sequence<std::tuple_size_v<Settings>>{});
  static_assert(has_name, "cocod: an algorithm needs `static constexpr const char* name`, shown in reports (docs/extending.md)");
  static_assert(has_begin,
                "cocod: an algorithm needs `void begin(Ops& ops, Span x)`: its buffers and exchanges for x.size() "
                "parameters, its per-run state (every hook is required, so that a misspelt one is an error: docs/extending.md)");
  static_assert(has_step,
                "cocod: an algorithm needs `void step(Ops& ops, Span x, std::span<const std::size_t> batch, T lr)`: one "
                "local step, which computes ops.gradient(batch, g) (docs/extending.md)");
  static_assert(has_end_round,
                "cocod: an algorithm needs `void end_round(Ops& ops, Span x)`, called at the end of every full round "
                "(empty when it does nothing there: docs/extending.md)");
  static_assert(has_finish,
                "cocod: an algorithm needs `void finish(Ops& ops, Span x)`, which leaves the consensus in x at the end of "
                "the run (docs/extending.md)");
  static_assert(has_serialize,
                "cocod: an algorithm needs `template <class Archive> void serialize(Archive& a)` naming its run state, "
                "a(\"anchor\", anchor_); ... (empty when it has none: docs/extending.md)");
  static_assert(constructible,
                "cocod: an algorithm is built with no arguments or, when it declares `using settings = std::tuple<...>;`, "
                "from `const settings&` (docs/extending.md)");
  static_assert(settings_described,
                "cocod: each settings type of an algorithm needs `static constexpr const char* name` and "
                "`serialize(Archive&)` naming its fields: checkpoints write and compare them by these names (docs/extending.md)");
  /// The rule's name ("algorithm" without one: its error is reported).
  static constexpr const char* name() noexcept {
    if constexpr (has_name) return Rule::name;
    else return "algorithm";
  }
  /// Every hook is there: the trainer calls them (after a missing one, nothing else fails).
  static constexpr bool ok =
      has_name && has_begin && has_step && has_end_round && has_finish && has_serialize && constructible && settings_described;
};

}  // namespace cocod::detail
