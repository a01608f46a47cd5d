#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/compressed.hpp is internal: include <cocod.hpp>"
#endif
// The compressed transport of an exchange, in rank order (docs/algorithm.md, compressed exchange):
//
//     d_i = (w_i a_i - w_i z) + e_i;   c_i = Q(d_i);   e_i = d_i - D(c_i)     (phase 1: encode)
//     all-to-all: slice j of every c_i, and the control slots, to worker j
//     S_j = D(c_0^j) + D(c_1^j) + ... + r_j;  C_j = Q(S_j);  r_j = S_j - D(C_j) (the owner)
//     all-gather: every C_j
//     abar = z + D(C)                                                       (every worker)
//
// Every worker decodes the same bytes in the same order, so all hold the same abar, bit for
// bit, whichever communicator moved them. The control slots travel unencoded with phase 1, and
// every worker sums all of them in rank order. Owner slices are ceil(n / N) long, the last ones
// padded, because the all-to-all needs blocks of one size (cocod/detail/partition.hpp).
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "cocod/backend/backend.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/compress/format.hpp"
#include "cocod/family/compress.hpp"
#include "cocod/family/fragments.hpp"

namespace cocod::detail {

template <class Comm, class B, class T>
class Compressed {
 public:
  using Span = typename backend::buffer<B, T>::span_type;

  /// For `workers` workers, `control` control slots, models of `total` parameters exchanged in
  /// pieces of at most `capacity` (the largest fragment); `fragments` owner residuals.
  void configure(const Compress& c, std::size_t workers, std::size_t control, std::size_t capacity, std::size_t total,
                 std::size_t fragments) {
    settings_ = c;
    coder_ = c.active() ? c.format.template coder<T>(c.block) : nullptr;
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
  [[nodiscard]] bool active() const noexcept { return settings_.active(); }
  /// The reference the piece in flight was posted with (z; unchanged until it lands).
  [[nodiscard]] Span reference() const noexcept { return reference_; }
  /// Bytes this worker sends for the piece just exchanged, in the pairwise all-to-all and the
  /// ring all-gather: (N - 1) blocks of each.
  [[nodiscard]] double bytes_sent() const noexcept { return static_cast<double>((workers_ - 1) * (block1(L_) + block2(L_))); }

  /// Phase 1: encodes this worker's deviation s - w z of `piece` (s = w a, in the model part)
  /// with the control slots, and posts the all-to-all. A withheld contribution sends zeros and
  /// keeps its residual.
  void post(Comm& comm, Span s, Span z, T w, const Piece& piece, std::span<const T> control, bool withheld) {
    comm_ = &comm;
    reference_ = z;
    n_ = s.size();
    fragment_ = piece.index;
    L_ = slice_length(n_);
    const std::span<const T> hs = host(s, host_model_), hz = host(z, host_reference_);
    const std::size_t b1 = block1(L_), e = block2(L_);
    std::fill(send1_.begin(), send1_.begin() + static_cast<std::ptrdiff_t>(workers_ * b1), std::byte{0});
    T* residual = residual_.data() + piece.offset;
    for (std::size_t j = 0; j < workers_; ++j) {
      std::byte* block = send1_.data() + j * b1;
      const std::size_t lo = std::min(n_, j * L_), hi = std::min(n_, lo + L_);
      if (!withheld) {
        std::fill(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(L_), T(0));
        for (std::size_t i = lo; i < hi; ++i) scratch_[i - lo] = (hs[i] - w * hz[i]) + residual[i];
        coder_->encode(std::span<T>(scratch_.data(), L_), std::span<std::byte>(block, e));
        for (std::size_t i = lo; i < hi; ++i) residual[i] = scratch_[i - lo];
      }
      std::memcpy(block + e, control.data(), control_ * sizeof(T));
    }
    request_ = comm.all_to_all_async(std::span<const std::byte>(send1_.data(), workers_ * b1),
                                     std::span<std::byte>(recv1_.data(), workers_ * b1));
    phase_ = 1;
  }
  /// Moves on when phase 1 has completed: the owner's sum and the post of phase 2. Never blocks.
  void advance() {
    if (phase_ != 1) return;
    if constexpr (requires { request_.ready(); })
      if (request_.ready()) second_phase();
  }
  /// Completes both phases: abar = z + D(C) into the model part s, the summed control slots into
  /// `control`. Returns when the last collective completed.
  comm::Clock::time_point wait(Span s, std::span<T> control) {
    if (phase_ == 1) second_phase();
    phase_ = 0;
    request_.wait();
    const std::size_t e = block2(L_);
    constexpr bool on_host = std::is_same_v<B, backend::cpu>;  // host memory: read and written in place
    T* out = on_host ? s.data() : host_model_.data();
    const T* z = on_host ? reference_.data() : host_reference_.data();
    for (std::size_t q = 0; q < workers_; ++q) {
      const std::size_t lo = std::min(n_, q * L_), hi = std::min(n_, lo + L_);
      if (lo == hi) continue;
      coder_->decode(std::span<const std::byte>(recv2_.data() + q * e, e), std::span<T>(scratch_.data(), L_));
      for (std::size_t i = lo; i < hi; ++i) out[i] = z[i] + scratch_[i - lo];
    }
    if constexpr (!on_host) store(B{}, s, 0, std::span<const T>(host_model_.data(), n_));
    std::copy(control_sum_.begin(), control_sum_.end(), control.begin());
    return request_.completed_at();
  }
  /// Waits for what is in flight, ignoring its failure (the run already failed).
  void drain() noexcept {
    phase_ = 0;  // the first collective is waited for; no second is posted
    try {
      if constexpr (requires { request_.abandon(); }) request_.abandon();  // (comm::Grouped: no gather)
      else request_.wait();
    } catch (...) {
    }
  }

  /// Run state: this worker's residual and its owner residuals.
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
  // The values of a span in host memory: the span itself on the host, else a copy in `mirror`.
  std::span<const T> host(Span s, std::vector<T>& mirror) {
    if constexpr (std::is_same_v<B, backend::cpu>) {
      return s;
    } else {
      mirror.resize(s.size());
      load(B{}, s, 0, std::span<T>(mirror));
      return mirror;
    }
  }
  // The owner's step: sums its slice of every worker's deviation in rank order with its own
  // residual, re-encodes the sum, posts the all-gather; and sums the control slots in rank order.
  void second_phase() {
    phase_ = 0;  // a failure of the first collective leaves nothing in flight
    request_.wait();
    const std::size_t b1 = block1(L_), e = block2(L_);
    for (std::size_t q = 0; q < workers_; ++q)
      coder_->decode(std::span<const std::byte>(recv1_.data() + q * b1, e), std::span<T>(sum_.data(), L_), q > 0);
    T* r = owner_residual_.data() + fragment_ * owner_slice_;
    for (std::size_t i = 0; i < L_; ++i) sum_[i] += r[i];
    coder_->encode(std::span<T>(sum_.data(), L_), std::span<std::byte>(send2_.data(), e));
    std::copy(sum_.begin(), sum_.begin() + static_cast<std::ptrdiff_t>(L_), r);
    for (std::size_t q = 0; q < workers_; ++q) {
      const std::byte* c = recv1_.data() + q * b1 + e;
      for (std::size_t k = 0; k < control_; ++k) {
        T v;
        std::memcpy(&v, c + k * sizeof(T), sizeof(T));
        control_sum_[k] = q == 0 ? v : control_sum_[k] + v;
      }
    }
    request_ = comm_->all_gather_async(std::span<const std::byte>(send2_.data(), e), std::span<std::byte>(recv2_.data(), workers_ * e));
    phase_ = 2;
  }
  [[nodiscard]] std::size_t slice_length(std::size_t n) const noexcept { return (n + workers_ - 1) / workers_; }
  [[nodiscard]] std::size_t block2(std::size_t L) const noexcept {
    return compress::encoded_bytes(settings_.format, L, settings_.block, sizeof(T));
  }
  [[nodiscard]] std::size_t block1(std::size_t L) const noexcept { return block2(L) + control_ * sizeof(T); }

  Compress settings_{};
  std::unique_ptr<compress::AnyCoder<T>> coder_;  // the codec's per-run state (none: no coder)
  std::size_t workers_ = 1, control_ = 0;
  std::size_t n_ = 0, L_ = 0, fragment_ = 0, owner_slice_ = 0;
  std::vector<T> residual_, owner_residual_, scratch_, sum_, control_sum_;
  std::vector<T> host_model_, host_reference_;  // device memory's host copies (unused on the host)
  std::vector<std::byte> send1_, recv1_, send2_, recv2_;
  Comm* comm_ = nullptr;
  Span reference_{};
  int phase_ = 0;  // 1: the all-to-all in flight, 2: the all-gather
  typename Comm::Request request_{};
};

}  // namespace cocod::detail
