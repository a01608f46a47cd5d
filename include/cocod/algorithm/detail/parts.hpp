#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/parts.hpp is internal: include <cocod.hpp>"
#endif
// The settings an algorithm is constructed with, after the communicator and the options, in any
// order and each at most once: its Schedule, its Update, and the settings of its own (for
// CoCoD-SGD: Outer, Compress, Fragments, OverlapDepth). Each goes to the part that uses it; a setting the
// algorithm does not take is a compile error (the constructor's constraint, taken_by_the_algorithm).
#include <cstddef>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cocod/algorithm/detail/rule_checks.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/errors.hpp"
#include "cocod/family/compress.hpp"

namespace cocod::detail {

/// The index in `Settings` (a std::tuple) of the slot that takes a P (an S or a std::optional<S>
/// slot), or the tuple's size when none does.
template <class P, class Settings>
constexpr std::size_t slot_of() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    std::size_t slot = sizeof...(I);
    ((slot == sizeof...(I) && (std::is_same_v<P, std::tuple_element_t<I, Settings>> ||
                               std::is_same_v<P, typename setting_type<std::tuple_element_t<I, Settings>>::type>)
          ? (void)(slot = I)
          : (void)0),
     ...);
    return slot;
  }(std::make_index_sequence<std::tuple_size_v<Settings>>{});
}

/// P is one of the parts an algorithm with these Schedule, Update and Settings takes.
template <class P, class Schedule, class Update, class Settings>
concept taken_by_the_algorithm =
    std::is_same_v<P, Schedule> || std::is_same_v<P, Update> || slot_of<P, Settings>() < std::tuple_size_v<Settings>;

template <class Schedule, class Update, class Settings>
struct Parts {
  Schedule schedule{};
  Update update{};
  Settings settings{};

  template <class... P>
  static Parts sort(P&&... parts) {
    static_assert(((count<std::remove_cvref_t<P>, P...>() == 1) && ...),
                  "cocod: a setting is given twice to the algorithm's constructor");
    Parts p;
    (p.take(std::forward<P>(parts)), ...);
    return p;
  }

 private:
  template <class D, class... P>
  static constexpr std::size_t count() {
    return (std::size_t{0} + ... + (std::is_same_v<D, std::remove_cvref_t<P>> ? 1 : 0));
  }
  template <class P>
  void take(P&& part) {
    using D = std::remove_cvref_t<P>;
    if constexpr (std::is_same_v<D, Schedule>) {
      schedule = std::forward<P>(part);
    } else if constexpr (std::is_same_v<D, Update>) {
      update = std::forward<P>(part);
    } else {
      static_assert(slot_of<D, Settings>() < std::tuple_size_v<Settings>, "cocod: the algorithm takes no setting of this type");
      std::get<slot_of<D, Settings>()>(settings) = std::forward<P>(part);
    }
  }
};

/// Validates a setting (std::invalid_argument naming the field); an empty optional is valid.
template <class S>
void validate_setting(const S& s) {
  if constexpr (requires { s.validate(); }) s.validate();
}
template <class S>
void validate_setting(const std::optional<S>& s) {
  if (s) validate_setting(*s);
}

/// What a setting needs of the communicator Comm (Compress: byte collectives).
template <class Comm, class S>
void check_communicator(const S& s) {
  if constexpr (requires { s.template check_communicator<Comm>(); }) s.template check_communicator<Comm>();
}

/// The rule of an algorithm, built from its validated settings (std::invalid_argument naming
/// the field, and a Compress its communicator cannot run).
template <class Rule, class Comm, class Settings>
Rule make_rule(const Settings& settings) {
  std::apply([](const auto&... each) {
    (validate_setting(each), ...);
    (check_communicator<Comm>(each), ...);
  }, settings);
  if constexpr (std::tuple_size_v<Settings> > 0) return Rule(settings);
  else return Rule();
}

}  // namespace cocod::detail
