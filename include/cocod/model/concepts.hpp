#pragma once
// What a model must provide, as C++20 concepts, and the one place that decides how cocod sees a
// model's parameters: their scalar, their backend (where they live) and their span type.
#include <Eigen/Core>

#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/backend/device_span.hpp"
#include "cocod/backend/scalar.hpp"
#include "cocod/backend/tags.hpp"

namespace cocod {

namespace model_requirements {
template <class P>
struct is_device_span : std::false_type {};
template <class T>
struct is_device_span<device_span<T>> : std::true_type {};

template <class P>
concept host_buffer = !is_device_span<P>::value && requires(P& p) {
  { p.data() } -> std::convertible_to<const volatile void*>;
  { p.size() } -> std::convertible_to<std::size_t>;
} && std::is_pointer_v<decltype(std::declval<P&>().data())> &&
    Scalar<std::remove_pointer_t<decltype(std::declval<P&>().data())>>;
}  // namespace model_requirements

/// How cocod sees a parameter buffer type P:
///   scalar   float or double
///   backend  backend::cpu or backend::cuda: where the memory lives, so which kernels run
///   view(p)  a span over p without copying (std::span<T> on the host, device_span<T> on a device)
/// Host buffers with data() -> T* and size() (std::vector<T>, std::span<T>, Eigen vectors and
/// maps) are covered here; <cocod/backend/cuda.hpp> adds thrust::device_vector<T> and
/// device_span<T>. Specialise it for a buffer type of your own.
template <class P>
struct parameter_traits {};

template <model_requirements::host_buffer P>
struct parameter_traits<P> {
  using scalar = std::remove_pointer_t<decltype(std::declval<P&>().data())>;
  using backend = backend::cpu;
  static std::span<scalar> view(P& p) noexcept { return {p.data(), static_cast<std::size_t>(p.size())}; }
};

/// A contiguous, mutable buffer of float or double that parameter_traits knows.
template <class P>
concept ParameterBuffer = requires(P& p) {
  typename parameter_traits<P>::scalar;
  typename parameter_traits<P>::backend;
  { parameter_traits<P>::view(p) };
} && Scalar<typename parameter_traits<P>::scalar>;

/// A span over any parameter buffer, without copying.
template <class P>
  requires ParameterBuffer<std::remove_cvref_t<P>>
[[nodiscard]] auto as_span(P&& p) noexcept {
  return parameter_traits<std::remove_cvref_t<P>>::view(p);
}

/// Non-owning views a model may return *by value* from parameters(): std::span, Eigen::Map and
/// device_span. Anything else must be returned by reference, so cocod never updates a temporary
/// copy. Specialise to admit your own view type.
template <class P>
struct is_parameter_view : std::false_type {};
template <class T, std::size_t E>
struct is_parameter_view<std::span<T, E>> : std::true_type {};
template <class P, int Options, class Stride>
struct is_parameter_view<Eigen::Map<P, Options, Stride>> : std::true_type {};
template <class T>
struct is_parameter_view<device_span<T>> : std::true_type {};

namespace model_requirements {
template <class M>
using parameters_t = decltype(std::declval<M&>().parameters());

/// parameters() returns a buffer cocod knows (by value, by reference or as a view).
template <class M>
concept returns_buffer = requires(M& m) {
  { m.parameters() };
} && ParameterBuffer<std::remove_cvref_t<parameters_t<M>>>;

template <class M>
concept has_parameters = returns_buffer<M> && (std::is_lvalue_reference_v<parameters_t<M>> ||
                                               is_parameter_view<std::remove_cvref_t<parameters_t<M>>>::value);

template <class M>
concept has_num_samples = requires(const M& m) {
  { m.num_samples() } -> std::convertible_to<std::size_t>;
};

template <class M>
struct traits_of;
template <returns_buffer M>
struct traits_of<M> {
  using traits = parameter_traits<std::remove_cvref_t<parameters_t<M>>>;
  using scalar = typename traits::scalar;
  using backend = typename traits::backend;
  using span = decltype(traits::view(std::declval<std::remove_cvref_t<parameters_t<M>>&>()));
};

template <class M, class Span>
concept takes_gradient = requires(M& m, std::span<const std::size_t> batch, Span gradient) {
  { m.loss_and_gradient(batch, gradient) } -> std::convertible_to<double>;
};

template <class M>
concept has_loss_and_gradient = has_parameters<M> && takes_gradient<M, typename traits_of<M>::span>;

template <class>
inline constexpr bool always_false = false;
}  // namespace model_requirements

/// A model cocod can train. Given `M& m`:
///  - `m.parameters()`: the live parameters x as one contiguous float/double buffer (the model
///    owns it; cocod updates it in place and never keeps a copy beyond its own buffers);
///  - `std::as_const(m).num_samples()`: the number of samples in this worker's shard;
///  - `m.loss_and_gradient(batch, gradient)`: with `batch` a span of sample indices in
///    [0, num_samples()), writes the gradient of the *mean* loss over the batch at the current
///    parameters into `gradient` (same size and memory space as the parameters: std::span<T> on
///    the host, device_span<T> on a device) and returns that mean loss.
template <class M>
concept Model = model_requirements::has_parameters<M> && model_requirements::has_num_samples<M> &&
                model_requirements::has_loss_and_gradient<M>;

/// A model with run state beyond its parameters (running statistics, a step counter of its
/// own): a checkpoint saves what save_state appends to `out` and hands it back to load_state on
/// resume. Optional; models without it have all their state in parameters().
template <class M>
concept StatefulModel = requires(const M& cm, M& m, std::vector<std::byte>& out, std::span<const std::byte> in) {
  cm.save_state(out);
  m.load_state(in);
};

/// A model with statistics that are not trained but follow the data (BatchNorm's running mean
/// and variance): `m.buffers()` returns them as one contiguous buffer of the parameters' scalar
/// and memory space, as a view (std::span<T>, device_span<T>) or by reference (never an owning
/// container by value, which cocod would update as a copy). cocod broadcasts
/// rank 0's buffers at begin(), like the parameters, and replaces every worker's with the
/// weighted average sum_i w_i b_i at the end of each round (and of a last, partial round), with
/// a blocking all-reduce counted as the round's communication. Optional.
template <class M>
concept BufferedModel = Model<M> && requires(M& m) {
  { as_span(m.buffers()) } -> std::same_as<typename model_requirements::traits_of<M>::span>;
} && (std::is_lvalue_reference_v<decltype(std::declval<M&>().buffers())> ||
      is_parameter_view<std::remove_cvref_t<decltype(std::declval<M&>().buffers())>>::value);

/// The scalar type of a model's parameters.
template <class M>
using scalar_of_t = typename model_requirements::traits_of<M>::scalar;
/// The backend of a model (backend::cpu or backend::cuda), from where its parameters live.
template <class M>
using backend_of_model_t = typename model_requirements::traits_of<M>::backend;
/// The span type of a model's parameters and gradients.
template <class M>
using span_of_t = typename model_requirements::traits_of<M>::span;

/// Checks a model type where a user names a trainer with it: the first mistake found gets
/// one message that names it and its fix, instead of a page of template errors.
template <class M>
constexpr bool check_model() {
  using namespace model_requirements;
  if constexpr (!requires(M& m) { m.parameters(); }) {
    static_assert(always_false<M>,
                  "cocod::Model: the model type needs a member `parameters()` returning a contiguous float or "
                  "double buffer, by reference (std::vector<T>&, Eigen::VectorX<T>&, thrust::device_vector<T>&) "
                  "or as a view (std::span<T>, Eigen::Map, cocod::device_span<T>)");
  } else if constexpr (!returns_buffer<M>) {
    static_assert(always_false<M>,
                  "cocod::Model: the model type needs a member `parameters()` returning one contiguous float or "
                  "double buffer (std::vector<T>&, Eigen::VectorX<T>&, std::span<T>, Eigen::Map, "
                  "cocod::device_span<T>); for a buffer type of your own, specialise cocod::parameter_traits");
  } else if constexpr (!has_parameters<M>) {
    static_assert(always_false<M>,
                  "cocod::Model: the model type needs a member `parameters()` that returns its buffer by "
                  "reference or as a view; it returns an owning container by value, so cocod would update a "
                  "copy: write `std::vector<T>& parameters()` (or return std::span<T>)");
  } else if constexpr (!has_num_samples<M>) {
    if constexpr (requires(M& m) { { m.num_samples() } -> std::convertible_to<std::size_t>; })
      static_assert(always_false<M>, "cocod::Model: the model type needs a const member `num_samples()`; its "
                                     "num_samples() is not const: write `std::size_t num_samples() const`");
    else
      static_assert(always_false<M>, "cocod::Model: the model type needs a const member `num_samples()` "
                                     "returning the size of this worker's shard");
  } else if constexpr (!has_loss_and_gradient<M>) {
    using T = typename traits_of<M>::scalar;
    using Other = std::conditional_t<std::is_same_v<T, float>, double, float>;
    constexpr bool host = std::is_same_v<typename traits_of<M>::span, std::span<T>>;
    if constexpr (host && takes_gradient<M, std::span<Other>> && std::is_same_v<T, float>)
      static_assert(always_false<M>, "cocod::Model: the model type needs a member `loss_and_gradient` whose "
                                     "gradient has the parameters' scalar: the parameters are float, so write "
                                     "`double loss_and_gradient(std::span<const std::size_t>, std::span<float>)`");
    else if constexpr (host && takes_gradient<M, std::span<Other>>)
      static_assert(always_false<M>, "cocod::Model: the model type needs a member `loss_and_gradient` whose "
                                     "gradient has the parameters' scalar: the parameters are double, so write "
                                     "`double loss_and_gradient(std::span<const std::size_t>, std::span<double>)`");
    else
      static_assert(always_false<M>, "cocod::Model: the model type needs a member `loss_and_gradient(std::span<const "
                                     "std::size_t> batch, std::span<T> gradient)` (cocod::device_span<T> for device "
                                     "parameters) that writes the gradient and returns the mean loss");
  }
  return Model<M>;
}

}  // namespace cocod
