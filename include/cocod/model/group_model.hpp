#pragma once
// A model trained by a group of ranks as one worker of an algorithm: every step, the members'
// gradients are averaged over the group's fast communicator (synchronous SGD inside the group),
// so that every member holds the same model and takes the same step.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "cocod/model/concepts.hpp"

namespace cocod {

/// `Member` (this rank's shard) averaged every step over `Inner`, the members of its group: each
/// member's gradient is weighed by its batch's size b_m: the group's gradient is
/// (sum_m b_m g_m) / (sum_m b_m), summed in member order by Inner's all-reduce, and its loss the
/// same weighted mean. Give it to an algorithm whose communicator is a comm::Grouped of the same inner
/// communicator, so that the groups are the algorithm's workers:
///
///     cocod::comm::Threads::run_groups(2, 2, [&](cocod::comm::Threads inner, cocod::comm::Threads outer) {
///       cocod::GroupModel model{MyModel{shard(rank, all)}, inner};
///       cocod::CoCoDSGD<decltype(model), cocod::comm::Grouped<cocod::comm::Threads>> opt{{inner, outer}, options};
///       opt.optimize(model, cocod::Epochs{5});
///     });
///
/// Host models (std::span parameters). The buffers of a BufferedModel are averaged the same way
/// at every step's end; the layout fingerprint and the state are the inner model's.
template <class Member, class Inner>
  requires cocod::Model<Member> && std::same_as<span_of_t<Member>, std::span<scalar_of_t<Member>>>
class GroupModel {
  using T = scalar_of_t<Member>;

 public:
  GroupModel(Member model, Inner inner) : model_(std::move(model)), inner_(std::move(inner)) {}

  decltype(auto) parameters() { return model_.parameters(); }
  [[nodiscard]] std::size_t num_samples() const { return static_cast<std::size_t>(model_.num_samples()); }

  /// The group's loss and gradient: this member's, then the members' weighted mean,
  /// (sum_q b_q g_q) / (sum_q b_q) with the sums in member order (one all-reduce over the group
  /// of the gradient and two control values).
  double loss_and_gradient(std::span<const std::size_t> batch, span_of_t<Member> g) {
    const double loss = static_cast<double>(model_.loss_and_gradient(batch, g));
    if (inner_.size() == 1) return loss;  // alone: the member's own, to the bit
    const std::size_t n = g.size();
    if (reduced_.size() != n + 2) reduced_.assign(n + 2, T(0));
    const auto b = static_cast<T>(batch.size());
    for (std::size_t i = 0; i < n; ++i) reduced_[i] = b * g[i];
    reduced_[n] = b * static_cast<T>(loss);
    reduced_[n + 1] = b;
    inner_.all_reduce(std::span<T>(reduced_));
    const T total = reduced_[n + 1];
    for (std::size_t i = 0; i < n; ++i) g[i] = reduced_[i] / total;
    if constexpr (BufferedModel<Member>) average_buffers(b, total);
    return static_cast<double>(reduced_[n] / total);
  }

  /// This member's model.
  [[nodiscard]] Member& inner() noexcept { return model_; }
  [[nodiscard]] const Member& inner() const noexcept { return model_; }
  /// The group's communicator.
  [[nodiscard]] Inner& group() noexcept { return inner_; }

  decltype(auto) buffers()
    requires BufferedModel<Member>
  {
    return model_.buffers();
  }
  [[nodiscard]] std::uint64_t layout_fingerprint() const
    requires requires(const Member& m) { m.layout_fingerprint(); }
  {
    return model_.layout_fingerprint();
  }
  void save_state(std::vector<std::byte>& out) const
    requires StatefulModel<Member>
  {
    model_.save_state(out);
  }
  void load_state(std::span<const std::byte> in)
    requires StatefulModel<Member>
  {
    model_.load_state(in);
  }

 private:
  void average_buffers(T b, T total) {
    auto buffers = as_span(model_.buffers());
    for (auto& v : buffers) v = b * v;
    inner_.all_reduce(buffers);
    for (auto& v : buffers) v = v / total;
  }

  Member model_;
  Inner inner_;
  std::vector<T> reduced_;
};

}  // namespace cocod
