#pragma once
// An algorithm of the command line (--algo) and its variant: a key such as "cocod", or
// "cocod+outer+int8+f4" (CoCoD-SGD with the outer Nesterov step, int8 deviations and 4
// fragments) or "cocod+d2" (overlap depth 2), so that one run compares several settings side by side. Example code, not part
// of the library.
#include <cocod.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"

namespace example {

/// The algorithms --algo knows, and what "all" stands for.
inline const std::vector<std::string>& algorithm_keys() {
  static const std::vector<std::string> keys{"cocod", "ssgd", "local", "pipe", "overlap-local", "diloco-delayed"};
  return keys;
}
inline const std::vector<std::string>& all_keys() {
  static const std::vector<std::string> keys{"cocod", "ssgd", "local", "pipe"};
  return keys;
}

/// A key split into its algorithm and its modifiers: outer (the outer optimizer of --outer,
/// Nesterov unless --outer sgd), bf16 / fp16 / int8 (compression), fN (N fragments), lerp,
/// dTAU (overlap depth TAU), dauto (the measured overlap depth), eager / delayed (how
/// diloco-delayed starts each round).
struct Variant {
  std::string base;
  bool outer = false, lerp = false;
  cocod::Compression compress = cocod::Compression::none;
  std::size_t fragments = 0;  // 0: as --fragments says
  std::optional<std::size_t> depth;  // none: as --overlap-depth says
  std::optional<cocod::OuterStart> start;  // none: as --merge says

  /// The variant of `key`; `error` gets why a key is not one (and the result is then empty).
  static Variant parse(const std::string& key, std::string* error = nullptr) {
    Variant v;
    std::size_t at = key.find('+');
    v.base = key.substr(0, at);
    auto fail = [&](const std::string& why) {
      if (error) *error = why;
      return Variant{};
    };
    bool known = false;
    for (const auto& k : algorithm_keys()) known = known || v.base == k;
    if (!known) return fail("unknown '" + v.base + "' (choose from " + cli::join(algorithm_keys(), ", ") + ", all)");
    std::vector<std::pair<std::string, std::string>> given;  // (what a modifier sets, the modifier)
    while (at != std::string::npos) {
      const std::size_t next = key.find('+', at + 1);
      const std::string m = key.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
      // each setting at most once: cocod+int8+int8 or cocod+int8+bf16 is refused, not taken as its last
      const std::string sets = m == "bf16" || m == "fp16" || m == "int8"   ? "a compression"
                               : m == "eager" || m == "delayed"            ? "a start"
                               : m.size() > 1 && m[0] == 'd'               ? "an overlap depth"
                               : m.size() > 1 && m[0] == 'f'               ? "a fragment count"
                                                                           : m;
      for (const auto& [what, earlier] : given)
        if (what == sets)
          return fail("'" + key + "': " + (earlier == m ? m + " is given twice" : earlier + " and " + m + " each set " + what) +
                      " (each setting at most once)");
      given.emplace_back(sets, m);
      unsigned long long f = 0;
      if (m == "outer") v.outer = true;
      else if (m == "lerp") v.lerp = true;
      else if (m == "bf16" || m == "fp16" || m == "int8") v.compress = cocod::compress::parse(m);
      else if (m.size() > 1 && m[0] == 'f' && cli::parse_whole(m.substr(1), 1, 1u << 20, f)) v.fragments = f;
      else if (m.size() > 1 && m[0] == 'd' && cli::parse_whole(m.substr(1), 0, 1000000, f)) v.depth = f;
      else if (m == "dauto") v.depth = cocod::OverlapDepth::automatic;
      else if (m == "eager") v.start = cocod::OuterStart::eager;
      else if (m == "delayed") v.start = cocod::OuterStart::delayed;
      else
        return fail("unknown modifier '" + m + "' in '" + key + "' (outer, bf16, fp16, int8, fN, lerp, dTAU, dauto, eager, delayed)");
      at = next;
    }
    if (v.outer && v.base != "cocod" && v.base != "local") return fail("'" + key + "': outer applies to cocod and local (diloco-delayed always has one)");
    if (v.compress != cocod::Compression::none && (v.base == "ssgd" || v.base == "pipe"))
      return fail("'" + key + "': compression applies to cocod, local and overlap-local");
    if (v.fragments > 0 && !v.takes_fragments()) return fail("'" + key + "': fragments apply to cocod and diloco-delayed");
    if (v.lerp && v.base != "cocod") return fail("'" + key + "': lerp applies to cocod only");
    if (v.start && v.base != "diloco-delayed") return fail("'" + key + "': eager and delayed apply to diloco-delayed only");
    if (v.depth && v.base != "cocod") return fail("'" + key + "': an overlap depth applies to cocod only");
    if (v.lerp && v.fragments < 2) return fail("'" + key + "': lerp merges fragments: add +fN with N > 1");
    return v;
  }
  [[nodiscard]] bool takes_outer() const { return base == "cocod" || base == "local"; }
  [[nodiscard]] bool takes_compress() const { return base != "ssgd" && base != "pipe"; }
  [[nodiscard]] bool takes_fragments() const { return base == "cocod" || base == "diloco-delayed"; }
};

/// --algo's check: a comma-separated list of keys with modifiers, or "all".
inline CLI::Validator algorithm_list() {
  return CLI::Validator(
      [](std::string& text) {
        const auto items = cli::split(text);
        if (items.empty()) return "needs at least one of " + cli::join(algorithm_keys(), ", ") + ", all" + cli::got(text);
        for (const auto& item : items) {
          if (item == "all") continue;
          std::string error;
          Variant::parse(item, &error);
          if (!error.empty()) return error;
        }
        return std::string();
      },
      "");
}

}  // namespace example
