#pragma once
// One contiguous parameter buffer, seen per tensor through Eigen maps: a multi-layer model
// keeps all its weights in one flat buffer (one all-reduce per round, no packing) and still
// writes its layers as matrices.
#include <Eigen/Core>

#include <cstddef>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "cocod/model/concepts.hpp"

namespace cocod {

/// The shape of one tensor of a ParameterPack: a rows x cols matrix (cols = 1 for a vector).
struct TensorShape {
  std::string name;
  Eigen::Index rows = 0;
  Eigen::Index cols = 1;
};

/// A flat buffer holding several tensors back to back (each column-major).
///
/// \tparam T float or double.
///
///     cocod::ParameterPack<float> pack{{"W1", 256, 784}, {"b1", 256}, {"W2", 10, 256}, {"b2", 10}};
///     auto W1 = pack.matrix("W1");             // Eigen::Map<MatrixX<float>>, no copy
///     auto gW1 = pack.matrix("W1", gradient);  // the same tensor inside a gradient buffer
template <Scalar T>
class ParameterPack {
 public:
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  using MatrixMap = Eigen::Map<Matrix>;
  using ConstMatrixMap = Eigen::Map<const Matrix>;
  using VectorMap = Eigen::Map<Vector>;

  ParameterPack() = default;
  ParameterPack(std::initializer_list<TensorShape> shapes) : ParameterPack(std::vector(shapes)) {}
  explicit ParameterPack(std::vector<TensorShape> shapes) : shapes_(std::move(shapes)) {
    std::size_t offset = 0;
    for (const auto& s : shapes_) {
      if (s.rows <= 0 || s.cols <= 0)
        throw std::invalid_argument("cocod::ParameterPack: tensor '" + s.name +
                                    "' must have positive rows and cols");
      offsets_.push_back(offset);
      offset += static_cast<std::size_t>(s.rows * s.cols);
    }
    data_.assign(offset, T(0));
  }

  /// The whole flat buffer; this is what a model returns from parameters().
  [[nodiscard]] std::span<T> parameters() noexcept { return data_; }
  [[nodiscard]] std::span<const T> parameters() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return data_.size(); }
  [[nodiscard]] T* data() noexcept { return data_.data(); }
  [[nodiscard]] const T* data() const noexcept { return data_.data(); }
  [[nodiscard]] std::size_t tensor_count() const noexcept { return shapes_.size(); }
  [[nodiscard]] const TensorShape& shape(std::size_t i) const { return shapes_.at(i); }

  /// Index of the tensor called `name`; throws std::out_of_range naming it when absent.
  [[nodiscard]] std::size_t index(const std::string& name) const {
    for (std::size_t i = 0; i < shapes_.size(); ++i)
      if (shapes_[i].name == name) return i;
    throw std::out_of_range("cocod::ParameterPack: no tensor named '" + name + "'");
  }

  /// Tensor i of this pack's own parameters.
  [[nodiscard]] MatrixMap matrix(std::size_t i) { return map(i, std::span<T>(data_)); }
  [[nodiscard]] ConstMatrixMap matrix(std::size_t i) const {
    return map(i, std::span<const T>(data_));
  }
  [[nodiscard]] MatrixMap matrix(const std::string& name) { return matrix(index(name)); }
  [[nodiscard]] ConstMatrixMap matrix(const std::string& name) const {
    return matrix(index(name));
  }

  /// Tensor i inside another buffer with this pack's layout (a gradient, a momentum buffer).
  [[nodiscard]] MatrixMap matrix(std::size_t i, std::span<T> buffer) const { return map(i, buffer); }
  [[nodiscard]] MatrixMap matrix(const std::string& name, std::span<T> buffer) const {
    return map(index(name), buffer);
  }
  [[nodiscard]] ConstMatrixMap matrix(std::size_t i, std::span<const T> buffer) const {
    return map(i, buffer);
  }

 private:
  template <class U>
  auto map(std::size_t i, std::span<U> buffer) const {
    using Map = std::conditional_t<std::is_const_v<U>, ConstMatrixMap, MatrixMap>;
    if (buffer.size() != data_.size())
      throw std::invalid_argument("cocod::ParameterPack: buffer has " +
                                  std::to_string(buffer.size()) + " elements, the pack has " +
                                  std::to_string(data_.size()));
    const auto& s = shapes_.at(i);
    return Map(buffer.data() + offsets_[i], s.rows, s.cols);
  }

  std::vector<TensorShape> shapes_;
  std::vector<std::size_t> offsets_;
  std::vector<T> data_;
};

}  // namespace cocod
