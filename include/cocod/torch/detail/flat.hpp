#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/torch/detail/flat.hpp is internal: include <cocod/torch.hpp>"
#endif
// Tensors re-seated as views into one flat, contiguous tensor: the module keeps its tensors
// (the same autograd variables, the same names), and their memory becomes consecutive slices of
// one buffer that cocod can update in place.
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace cocod::torch::detail {

/// One tensor of a module, with the name the module gives it ("conv1.weight").
struct Named {
  std::string name;
  ::torch::Tensor tensor;
};

/// The tensors of `items` that are not an earlier one (tied weights are registered under several
/// names but are one tensor, and count once).
inline std::vector<Named> distinct(const ::torch::OrderedDict<std::string, ::torch::Tensor>& items) {
  std::vector<Named> out;
  std::unordered_set<const void*> seen;
  for (const auto& item : items)
    if (item.value().defined() && seen.insert(item.value().unsafeGetTensorImpl()).second)
      out.push_back({item.key(), item.value()});
  return out;
}

/// `tensors` re-seated as views into `flat`, in order.
class Flat {
 public:
  Flat() = default;
  /// Copies each tensor into a new flat tensor of `options` and makes the tensor a view of its
  /// slice (Tensor::set_data: the variable, its name in the module and its autograd identity
  /// stay; only its memory moves).
  Flat(std::vector<Named> tensors, ::torch::TensorOptions options) : tensors_(std::move(tensors)) {
    std::int64_t n = 0;
    for (const Named& t : tensors_) {
      offsets_.push_back(n);
      n += t.tensor.numel();
    }
    flat_ = ::torch::empty({n}, options);
    ::torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      ::torch::Tensor slice = view(flat_, i);
      slice.copy_(tensors_[i].tensor);
      tensors_[i].tensor.set_data(slice);
    }
  }

  [[nodiscard]] const ::torch::Tensor& tensor() const noexcept { return flat_; }
  [[nodiscard]] std::int64_t numel() const noexcept { return flat_.defined() ? flat_.numel() : 0; }
  [[nodiscard]] const std::vector<Named>& tensors() const noexcept { return tensors_; }
  [[nodiscard]] std::int64_t offset(std::size_t i) const noexcept { return offsets_[i]; }

  /// Tensor i's slice of `buffer` (a flat tensor of the same size), in tensor i's shape.
  [[nodiscard]] ::torch::Tensor view(const ::torch::Tensor& buffer, std::size_t i) const {
    const ::torch::Tensor& t = tensors_[i].tensor;
    return buffer.narrow(0, offsets_[i], t.numel()).view(t.sizes());
  }

 private:
  std::vector<Named> tensors_;
  std::vector<std::int64_t> offsets_;
  ::torch::Tensor flat_;
};

}  // namespace cocod::torch::detail
