#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/torch/detail/layout.hpp is internal: include <cocod/torch.hpp>"
#endif
// A module's layout as a 64-bit fingerprint that the workers compare at begin(): every tensor's
// name, shape and type, in the adapter's order, and the values of the frozen parameters, which
// cocod neither trains nor broadcasts, so that a module built differently on one worker (another
// order of layers of the same size, a frozen layer initialised otherwise) is refused.
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cocod/torch/detail/flat.hpp"

namespace cocod::torch::detail {

class LayoutHash {
 public:
  /// Each tensor's name, shape and type; with `values`, its elements' bytes too.
  LayoutHash& add(const std::vector<Named>& tensors, bool values = false) {
    for (const Named& t : tensors) {
      bytes(t.name.data(), t.name.size());
      const auto dims = t.tensor.sizes();
      bytes(dims.data(), dims.size() * sizeof(std::int64_t));
      const auto type = static_cast<std::int32_t>(t.tensor.scalar_type());
      bytes(&type, sizeof type);
      if (values) {
        const ::torch::Tensor c = t.tensor.contiguous();
        bytes(c.data_ptr(), static_cast<std::size_t>(c.numel()) * c.element_size());
      }
    }
    return *this;
  }
  [[nodiscard]] std::uint64_t value() const noexcept { return h_; }

 private:
  void bytes(const void* p, std::size_t n) noexcept {  // FNV-1a, 64 bits
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h_ = (h_ ^ b[i]) * 0x100000001b3ULL;
  }
  std::uint64_t h_ = 0xcbf29ce484222325ULL;
};

}  // namespace cocod::torch::detail
