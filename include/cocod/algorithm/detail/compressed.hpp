#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/compressed.hpp is internal: include <cocod.hpp>"
#endif
// The host side of a compressed exchange, in rank order (docs/algorithm.md, compressed exchange):
//
//     d_i = (w_i a_i - w_i z) + e_i;   c_i = Q(d_i);   e_i = d_i - D(c_i)     (phase 1: encode)
//     all-to-all: slice j of every c_i, and the control slots, to worker j
//     S_j = D(c_0^j) + D(c_1^j) + ... + r_j;  C_j = Q(S_j);  r_j = S_j - D(C_j) (the owner)
//     all-gather: every C_j
//     abar = z + D(C)                                                       (every worker)
//
// Every worker decodes the same bytes in the same order, so all hold the same abar, bit for
// bit, whichever communicator moved them. The control slots travel unencoded and are summed in
// rank order by every owner alike.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "cocod/compress/codec.hpp"
#include "cocod/compress/format.hpp"

namespace cocod::detail {

template <class T>
class Compressed {
 public:
  /// For `workers` workers, `control` control slots, models of `total`
  /// parameters exchanged in pieces of at most `capacity` (the largest fragment) at offsets that
  /// are fragment starts; `fragments` owner residuals.
  void configure(Compression format, std::size_t block, std::size_t workers, std::size_t control,
                 std::size_t capacity, std::size_t total, std::size_t fragments) {
    format_ = format;
    block_ = block;
    workers_ = workers;
    control_ = control;
    residual_.assign(total, T(0));
    const std::size_t L = slice_length(capacity);
    owner_residual_.assign(fragments * L, T(0));
    owner_slice_ = L;
    send1_.resize(workers * block1(L));
    recv1_.resize(workers * block1(L));
    send2_.resize(block2(L));
    recv2_.resize(workers * block2(L));
    scratch_.resize(L);
    sum_.resize(L);
    control_sum_.resize(control);
  }
  [[nodiscard]] bool active() const noexcept { return format_ != Compression::none; }

  /// Phase 1: encodes this worker's deviation of the piece [offset, offset + s.size()) of
  /// fragment `fragment`: s = w a (host), z the reference (host, same piece), `control` the
  /// control slots. A withheld contribution sends zeros and keeps its residual.
  void encode(std::span<const T> s, std::span<const T> z, T w, std::size_t offset, std::size_t fragment,
              std::span<const T> control, bool withheld) {
    n_ = s.size();
    fragment_ = fragment;
    L_ = slice_length(n_);
    const std::size_t b1 = block1(L_), e = block2(L_);
    std::fill(send1_.begin(), send1_.begin() + static_cast<std::ptrdiff_t>(workers_ * b1), std::byte{0});
    T* residual = residual_.data() + offset;
    for (std::size_t j = 0; j < workers_; ++j) {
      std::byte* block = send1_.data() + j * b1;
      const std::size_t lo = std::min(n_, j * L_), hi = std::min(n_, lo + L_);
      if (!withheld) {
        std::fill(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(L_), T(0));
        for (std::size_t i = lo; i < hi; ++i) scratch_[i - lo] = (s[i] - w * z[i]) + residual[i];
        compress::encode(format_, std::span<T>(scratch_.data(), L_), block_, std::span<std::byte>(block, e));
        for (std::size_t i = lo; i < hi; ++i) residual[i] = scratch_[i - lo];
      }
      std::memcpy(block + e, control.data(), control_ * sizeof(T));
    }
  }
  /// The buffers of phase 1's all-to-all (blocks of equal size, one per worker).
  [[nodiscard]] std::span<const std::byte> send1() const noexcept { return {send1_.data(), workers_ * block1(L_)}; }
  [[nodiscard]] std::span<std::byte> recv1() noexcept { return {recv1_.data(), workers_ * block1(L_)}; }

  /// The owner's step: sums its slice of every worker's deviation in rank order with its own
  /// residual, re-encodes the sum for phase 2, and sums the control slots in rank order.
  void reduce() {
    const std::size_t b1 = block1(L_), e = block2(L_);
    for (std::size_t q = 0; q < workers_; ++q)
      compress::decode(format_, std::span<const std::byte>(recv1_.data() + q * b1, e), block_,
                       std::span<T>(sum_.data(), L_), q > 0);
    T* r = owner_residual_.data() + fragment_ * owner_slice_;
    for (std::size_t i = 0; i < L_; ++i) sum_[i] += r[i];
    compress::encode(format_, std::span<T>(sum_.data(), L_), block_, std::span<std::byte>(send2_.data(), e));
    std::copy(sum_.begin(), sum_.begin() + static_cast<std::ptrdiff_t>(L_), r);
    for (std::size_t q = 0; q < workers_; ++q) {
      const std::byte* c = recv1_.data() + q * b1 + e;
      for (std::size_t k = 0; k < control_; ++k) {
        T v;
        std::memcpy(&v, c + k * sizeof(T), sizeof(T));
        control_sum_[k] = q == 0 ? v : control_sum_[k] + v;
      }
    }
  }
  /// The buffers of phase 2's all-gather.
  [[nodiscard]] std::span<const std::byte> send2() const noexcept { return {send2_.data(), block2(L_)}; }
  [[nodiscard]] std::span<std::byte> recv2() noexcept { return {recv2_.data(), workers_ * block2(L_)}; }

  /// abar = z + D(C) into `out` (host, the piece's n values), and the summed control slots.
  void finish(std::span<const T> z, std::span<T> out, std::span<T> control) {
    const std::size_t e = block2(L_);
    for (std::size_t q = 0; q < workers_; ++q) {
      const std::size_t lo = std::min(n_, q * L_), hi = std::min(n_, lo + L_);
      if (lo == hi) continue;
      compress::decode(format_, std::span<const std::byte>(recv2_.data() + q * e, e), block_,
                       std::span<T>(scratch_.data(), L_));
      for (std::size_t i = lo; i < hi; ++i) out[i] = z[i] + scratch_[i - lo];
    }
    std::copy(control_sum_.begin(), control_sum_.end(), control.begin());
  }

  /// Bytes this worker sends for the piece just exchanged, in the pairwise all-to-all and the
  /// ring all-gather: (N - 1) blocks of each.
  [[nodiscard]] double bytes_sent() const noexcept {
    return static_cast<double>((workers_ - 1) * (block1(L_) + block2(L_)));
  }

  template <class Archive>
  void serialize(Archive& a) {
    const std::size_t residual_size = residual_.size(), owner_size = owner_residual_.size();
    a("residual", residual_);
    a("owner_residual", owner_residual_);
    if constexpr (!Archive::saving)
      if (residual_.size() != residual_size || owner_residual_.size() != owner_size)
        a.fail("residual", "does not have the run's size (corrupt)");
  }

 private:
  [[nodiscard]] std::size_t slice_length(std::size_t n) const noexcept { return (n + workers_ - 1) / workers_; }
  [[nodiscard]] std::size_t block2(std::size_t L) const noexcept { return compress::encoded_bytes(format_, L, block_, sizeof(T)); }
  [[nodiscard]] std::size_t block1(std::size_t L) const noexcept { return block2(L) + control_ * sizeof(T); }

  Compression format_ = Compression::none;
  std::size_t block_ = 0, workers_ = 1, control_ = 0;
  std::size_t n_ = 0, L_ = 0, fragment_ = 0, owner_slice_ = 0;
  std::vector<T> residual_, owner_residual_, scratch_, sum_, control_sum_;
  std::vector<std::byte> send1_, recv1_, send2_, recv2_;
};

}  // namespace cocod::detail
