#pragma once
// A model made of a parameter vector and a plain function object, for users who do not want
// to write a class.
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/model/concepts.hpp"

namespace cocod {

/// Adapts `f(batch, parameters, gradient) -> loss` into a cocod::Model that owns its
/// parameters. `f` is called with a span of sample indices, the current parameters (const) and
/// the gradient to fill; it returns the mean loss over the batch.
///
/// \tparam T float or double.
/// \tparam F the function object's type.
template <Scalar T, class F>
class FunctionModel {
 public:
  FunctionModel(std::vector<T> initial, std::size_t num_samples, F f)
      : parameters_(std::move(initial)), num_samples_(num_samples), f_(std::move(f)) {}

  [[nodiscard]] std::span<T> parameters() noexcept { return parameters_; }
  [[nodiscard]] std::size_t num_samples() const noexcept { return num_samples_; }
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<T> gradient) {
    return static_cast<double>(
        f_(batch, std::span<const T>(parameters_.data(), parameters_.size()), gradient));
  }

 private:
  std::vector<T> parameters_;
  std::size_t num_samples_;
  F f_;
};

/// Builds a FunctionModel; T is deduced from the initial parameters.
template <Scalar T, class F>
  requires std::is_invocable_r_v<double, F&, std::span<const std::size_t>, std::span<const T>,
                                 std::span<T>>
[[nodiscard]] auto make_model(std::vector<T> initial, std::size_t num_samples, F f) {
  return FunctionModel<T, F>(std::move(initial), num_samples, std::move(f));
}

}  // namespace cocod
