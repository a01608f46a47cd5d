#pragma once
// The scalar types cocod trains in. It sits with the backend tags, below comm/ and model/, so
// that both use it without depending on each other.
#include <concepts>

namespace cocod {

/// float or double: the element type of parameters, gradients and reduced buffers.
template <class T>
concept Scalar = std::same_as<T, float> || std::same_as<T, double>;

}  // namespace cocod
