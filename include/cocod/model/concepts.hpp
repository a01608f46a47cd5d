#pragma once
// What a model must provide, as C++20 concepts, and the helpers that read its parameters.
#include <Eigen/Core>

#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

namespace cocod {

/// The scalar types cocod trains in.
template <class T>
concept Scalar = std::same_as<T, float> || std::same_as<T, double>;

/// A contiguous, mutable buffer of float or double: anything with data() and size(), such as
/// std::span<T>, std::vector<T>&, Eigen::VectorX<T>& or an Eigen::Map of a vector.
template <class P>
concept ParameterBuffer = requires(P& p) {
  { p.data() };
  { p.size() } -> std::convertible_to<std::size_t>;
} && Scalar<std::remove_pointer_t<decltype(std::declval<P&>().data())>>;

/// The scalar of a parameter buffer.
template <ParameterBuffer P>
using scalar_of_buffer_t = std::remove_pointer_t<decltype(std::declval<P&>().data())>;

/// A std::span over any parameter buffer, without copying.
template <ParameterBuffer P>
[[nodiscard]] auto as_span(P&& p) noexcept {
  using T = scalar_of_buffer_t<std::remove_reference_t<P>>;
  return std::span<T>(p.data(), static_cast<std::size_t>(p.size()));
}

/// Non-owning views a model may return *by value* from parameters(): std::span and, in
/// cocod/model/eigen.hpp terms, Eigen::Map. Anything else must be returned by reference, so
/// cocod never updates a temporary copy. Specialise to admit your own view type.
template <class P>
struct is_parameter_view : std::false_type {};
template <class T, std::size_t E>
struct is_parameter_view<std::span<T, E>> : std::true_type {};
template <class P, int Options, class Stride>
struct is_parameter_view<Eigen::Map<P, Options, Stride>> : std::true_type {};

namespace model_requirements {
template <class M>
concept has_parameters = requires(M& m) {
  { m.parameters() };
} && ParameterBuffer<std::remove_reference_t<decltype(std::declval<M&>().parameters())>> &&
    (std::is_lvalue_reference_v<decltype(std::declval<M&>().parameters())> ||
     is_parameter_view<std::remove_cvref_t<decltype(std::declval<M&>().parameters())>>::value);

template <class M>
concept has_num_samples = requires(const M& m) {
  { m.num_samples() } -> std::convertible_to<std::size_t>;
};

template <class M>
struct scalar_of;
template <has_parameters M>
struct scalar_of<M> {
  using type =
      scalar_of_buffer_t<std::remove_reference_t<decltype(std::declval<M&>().parameters())>>;
};

template <class M>
concept has_loss_and_gradient = has_parameters<M> &&
    requires(M& m, std::span<const std::size_t> batch,
             std::span<typename scalar_of<M>::type> gradient) {
  { m.loss_and_gradient(batch, gradient) } -> std::convertible_to<double>;
};
}  // namespace model_requirements

/// A model cocod can train. Given `M& m`:
///  - `m.parameters()`: the live parameters x as one contiguous float/double buffer (the model
///    owns it; cocod updates it in place and never keeps a copy beyond its own buffers);
///  - `std::as_const(m).num_samples()`: the number of samples in this worker's shard;
///  - `m.loss_and_gradient(batch, gradient)`: with `batch` a span of sample indices in
///    [0, num_samples()), writes the gradient of the *mean* loss over the batch at the current
///    parameters into `gradient` (same size as the parameters) and returns that mean loss.
template <class M>
concept Model = model_requirements::has_parameters<M> && model_requirements::has_num_samples<M> &&
                model_requirements::has_loss_and_gradient<M>;

/// The scalar type of a model's parameters.
template <class M>
using scalar_of_t = typename model_requirements::scalar_of<M>::type;

/// Checks a model type where a user names an optimizer with it; each missing piece gets its
/// own message instead of a page of template errors.
template <class M>
constexpr bool check_model() {
  static_assert(model_requirements::has_parameters<M>,
                "cocod::Model: the model type needs a member `parameters()` returning a "
                "contiguous float or double buffer, by reference (std::vector<T>&, "
                "Eigen::VectorX<T>&) or as a view (std::span<T>, Eigen::Map)");
  static_assert(model_requirements::has_num_samples<M>,
                "cocod::Model: the model type needs a const member `num_samples()` returning "
                "the size of this worker's shard");
  static_assert(model_requirements::has_loss_and_gradient<M>,
                "cocod::Model: the model type needs a member `loss_and_gradient(std::span<const "
                "std::size_t> batch, std::span<T> gradient)` that writes the gradient and "
                "returns the mean loss");
  return Model<M>;
}

}  // namespace cocod
