#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/outer.hpp is internal: include <cocod.hpp>"
#endif
// The outer model z of the model-averaging family, which every worker holds identically, and
// its outer optimizer's momentum (Options::outer). With no outer optimizer z is the latest
// average; a compressed exchange sends deviations from it.
#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

#include "cocod/backend/backend.hpp"
#include "cocod/options.hpp"

namespace cocod::detail {

/// Fragment f of F equal slices of n parameters: [f n / F, (f + 1) n / F).
struct Fragments {
  std::size_t n = 0, count = 1;
  [[nodiscard]] std::size_t begin(std::size_t f) const noexcept { return f * n / count; }
  [[nodiscard]] std::size_t size(std::size_t f) const noexcept { return (f + 1) * n / count - f * n / count; }
  /// The largest fragment.
  [[nodiscard]] std::size_t capacity() const noexcept { return (n + count - 1) / count; }
};

template <class B, class T>
class OuterModel {
 public:
  using Buffer = backend::buffer<B, T>;
  using Span = typename Buffer::span_type;

  /// Room for n parameters in `fragments` pieces, each with its own outer state.
  void allocate(std::size_t n, const std::optional<Outer>& rule, std::size_t fragments) {
    rule_ = rule;
    z_.resize(n);
    momentum_.resize(rule && rule->momentum > 0.0 ? n : 0);
    stepped_.assign(fragments, 0);
  }
  /// z = x (rank 0's model, the same on every worker), no outer step taken yet.
  void start(Span x) {
    copy(B{}, z_.span(), x);
    std::fill(stepped_.begin(), stepped_.end(), 0);
  }
  /// The outer model, or its piece [begin, begin + n).
  [[nodiscard]] Span z() noexcept { return z_.span(); }
  [[nodiscard]] Span z(std::size_t begin, std::size_t n) noexcept { return z_.span().subspan(begin, n); }

  /// The round's outer step on the piece of fragment `f` at `begin`, from the average `abar` of
  /// that piece: z = outer(z, z - abar); with no outer optimizer, z = abar.
  void step(std::size_t begin, Span abar, std::size_t f = 0) {
    Span z = z_.span().subspan(begin, abar.size());
    if (!rule_) {
      copy(B{}, z, abar);
      return;
    }
    Span b = momentum_.size() > 0 ? momentum_.span().subspan(begin, abar.size()) : Span{};
    outer_step(B{}, z, abar, b, static_cast<T>(rule_->learning_rate), static_cast<T>(rule_->momentum), rule_->nesterov,
               stepped_[f] == 0);
    stepped_[f] = 1;
  }

  template <class Archive>
  void serialize(Archive& a) {
    const std::size_t fragments = stepped_.size();
    a("z", z_);
    a("momentum", momentum_);
    a("stepped", stepped_);
    if constexpr (!Archive::saving)
      if (stepped_.size() != fragments) a.fail("stepped", "does not have one entry per fragment (corrupt)");
  }

 private:
  std::optional<Outer> rule_;
  Buffer z_, momentum_;
  std::vector<unsigned char> stepped_;  // per fragment: an outer step was taken (PyTorch's first-step buffer)
};

}  // namespace cocod::detail
