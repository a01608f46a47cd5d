#pragma once
// A libtorch module, this worker's shard of a dataset and a loss, as a cocod::Model, with no
// copy per step: the module's parameters are views into one flat tensor that cocod updates in
// place, and autograd writes their gradients straight into cocod's gradient buffer.
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cocod/backend/scalar.hpp"
#define COCOD_INTERNAL_INCLUDE
#include "cocod/torch/detail/flat.hpp"
#include "cocod/torch/detail/layout.hpp"
#undef COCOD_INTERNAL_INCLUDE

namespace cocod::torch {

/// Adapts a torch::nn::Module into a cocod::Model (and cocod::BufferedModel, cocod::StatefulModel).
///
///  - Parameters: every parameter that requires a gradient, in the module's order (tied weights
///    once), is re-seated as a view into one flat tensor; parameters() is that tensor's memory,
///    which cocod updates in place, so `module` always holds the live parameters. Parameters that
///    do not require a gradient are frozen: cocod leaves them alone (build them alike on every
///    worker; begin() compares them, with every tensor's name and shape: layout_fingerprint()).
///  - Gradients: for each step the parameters' `.grad()` are views into the gradient buffer cocod
///    passes, zeroed, and backward() accumulates into them in place; between steps they are
///    undefined (the buffer is cocod's).
///  - Buffers (BatchNorm's running statistics) of the parameters' scalar: views into a second flat
///    tensor, buffers(), which cocod averages over the workers at each round's end. Counters stay
///    each worker's own: integer buffers, and BatchNorm's num_batches_tracked whatever its dtype
///    (->to(torch::kFloat) casts it too). Every buffer travels in checkpoints (save_state/load_state).
///
/// Each step puts the module in training mode and enables gradients (whatever torch::NoGradGuard
/// the caller holds): evaluate with `module->eval()` and a torch::NoGradGuard of your own.
///
/// \tparam Net  a module holder (torch::nn::Sequential, a TORCH_MODULE) or std::shared_ptr to a
///              torch::nn::Module with `forward(torch::Tensor) -> torch::Tensor`.
/// \tparam Loss `loss(output, targets) -> torch::Tensor`: the mean loss over the batch, a scalar.
/// \tparam T    float (the default) or double: the scalar of every parameter.
template <class Net, class Loss, Scalar T = float>
class ModuleModel {
 public:
  /// `inputs` and `targets`: this worker's shard, one sample per row (dimension 0). Throws
  /// std::invalid_argument naming what does not fit: a parameter or buffer that is not T (name
  /// and type), a tensor not on the CPU, a module without trainable parameters, shards of
  /// different lengths.
  ModuleModel(Net net, ::torch::Tensor inputs, ::torch::Tensor targets, Loss loss)
      : net_(std::move(net)), inputs_(std::move(inputs)), targets_(std::move(targets)), loss_(std::move(loss)) {
    if (!inputs_.defined() || !targets_.defined())
      fail("inputs and targets must be defined tensors");
    if (inputs_.dim() == 0 || targets_.dim() == 0 || inputs_.size(0) != targets_.size(0))
      fail("inputs and targets must hold the same number of samples along dimension 0 (inputs: " +
           shape(inputs_) + ", targets: " + shape(targets_) + ")");
    if (inputs_.size(0) == 0) fail("the shard is empty (inputs: " + shape(inputs_) + ")");
    check_cpu("inputs", inputs_);
    check_cpu("targets", targets_);

    std::vector<detail::Named> trainable;
    for (detail::Named& p : detail::distinct(module().named_parameters(/*recurse=*/true))) {
      check_scalar("parameter", p);
      if (p.tensor.requires_grad()) trainable.push_back(std::move(p));
      else frozen_.push_back(std::move(p));
    }
    if (trainable.empty()) fail("the module has no parameter that requires a gradient");
    std::vector<detail::Named> averaged;
    for (detail::Named& b : detail::distinct(module().named_buffers(/*recurse=*/true))) {
      check_cpu("buffer '" + b.name + "'", b.tensor);
      if (!b.tensor.is_floating_point() || counter(b.name))
        kept_.push_back(std::move(b));  // a counter, whatever its dtype after ->to(): this worker's own, checkpointed
      else if (b.tensor.scalar_type() == dtype())
        averaged.push_back(std::move(b));
      else
        fail("buffer '" + b.name + "' is " + std::string(c10::toString(b.tensor.scalar_type())) + "; floating-point " +
             "buffers must be " + std::string(c10::toString(dtype())) + " like the parameters");
    }
    const auto options = ::torch::TensorOptions().dtype(dtype()).device(::torch::kCPU);
    parameters_ = detail::Flat(std::move(trainable), options);
    buffers_ = detail::Flat(std::move(averaged), options);
  }
  ModuleModel(ModuleModel&&) = default;
  ModuleModel& operator=(ModuleModel&&) = default;
  ModuleModel(const ModuleModel&) = delete;  // two adapters would share one module's memory
  ModuleModel& operator=(const ModuleModel&) = delete;

  // ---- cocod::Model ----------------------------------------------------------------------------

  /// The live parameters: the flat tensor the module's parameters are views of.
  [[nodiscard]] std::span<T> parameters() noexcept { return span(parameters_); }
  [[nodiscard]] std::size_t num_samples() const noexcept { return static_cast<std::size_t>(inputs_.size(0)); }

  /// The mean loss over `batch` (indices into the shard) and its gradient, which backward()
  /// writes into `gradient` through the parameters' .grad() views.
  double loss_and_gradient(std::span<const std::size_t> batch, std::span<T> gradient) {
    if (gradient.size() != static_cast<std::size_t>(parameters_.numel()))
      throw std::invalid_argument("cocod::torch::ModuleModel: the gradient has " + std::to_string(gradient.size()) +
                                  " elements, the parameters " + std::to_string(parameters_.numel()));
    check_seated();
    ::torch::AutoGradMode enable_grad(true);
    if (train_each_step_) module().train(true);
    const ::torch::Tensor g = ::torch::from_blob(gradient.data(), {parameters_.numel()}, parameters_.tensor().options());
    g.zero_();
    struct Unseat {  // between steps .grad() would point into cocod's buffer: leave it undefined
      ModuleModel& m;
      ~Unseat() {
        for (const detail::Named& p : m.parameters_.tensors()) p.tensor.mutable_grad() = ::torch::Tensor();
      }
    } unseat{*this};
    seat_gradients(g);

    index_.resize(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) index_[i] = static_cast<std::int64_t>(batch[i]);
    const ::torch::Tensor index = ::torch::from_blob(index_.data(), {static_cast<std::int64_t>(index_.size())}, ::torch::kLong);
    ::torch::Tensor loss = loss_(net_->forward(inputs_.index_select(0, index)), targets_.index_select(0, index));
    if (loss.numel() != 1)
      throw std::invalid_argument("cocod::torch::ModuleModel: the loss returned a tensor of shape " + shape(loss) +
                                  "; it must return the batch's mean loss, a scalar");
    loss.backward();
    // Autograd accumulates into a defined .grad() in place; should anything have replaced a view
    // (the loss resetting or assigning .grad()), its values are copied into cocod's buffer instead.
    for (std::size_t i = 0; i < parameters_.tensors().size(); ++i) {
      const ::torch::Tensor& p = parameters_.tensors()[i].tensor;
      if (p.grad().defined() && p.grad().data_ptr() != static_cast<void*>(gradient.data() + parameters_.offset(i))) {
        ::torch::NoGradGuard no_grad;
        parameters_.view(g, i).copy_(p.grad());
        ++copies_;
      }
    }
    return loss.item<double>();
  }

  // ---- cocod::BufferedModel and cocod::StatefulModel --------------------------------------------

  /// The module's buffers of scalar T (BatchNorm's running mean and variance), flat; empty if none.
  [[nodiscard]] std::span<T> buffers() noexcept { return span(buffers_); }

  /// Appends every buffer (the averaged ones and integer counters) to `out`.
  void save_state(std::vector<std::byte>& out) const {
    auto put = [&](const ::torch::Tensor& t) {
      const ::torch::Tensor c = t.contiguous();
      const std::uint64_t bytes = static_cast<std::uint64_t>(c.numel()) * c.element_size();
      const auto* b = reinterpret_cast<const std::byte*>(&bytes);
      out.insert(out.end(), b, b + sizeof bytes);
      const auto* data = static_cast<const std::byte*>(c.data_ptr());
      out.insert(out.end(), data, data + bytes);
    };
    if (buffers_.numel() > 0) put(buffers_.tensor());
    for (const detail::Named& b : kept_) put(b.tensor);
  }
  /// Restores what save_state wrote (std::runtime_error naming the buffer that does not fit).
  void load_state(std::span<const std::byte> in) {
    auto get = [&](const ::torch::Tensor& t, const std::string& name) {
      std::uint64_t bytes = 0;
      const std::uint64_t want = static_cast<std::uint64_t>(t.numel()) * t.element_size();
      if (in.size() < sizeof bytes || (std::memcpy(&bytes, in.data(), sizeof bytes), bytes != want) ||
          in.size() - sizeof bytes < bytes)
        throw std::runtime_error("cocod::torch::ModuleModel: the saved state does not fit " + name + " (" +
                                 std::to_string(want) + " bytes): is it the same module?");
      ::torch::NoGradGuard no_grad;
      ::torch::Tensor saved = ::torch::empty(t.sizes(), t.options());  // aligned, contiguous
      std::memcpy(saved.data_ptr(), in.data() + sizeof bytes, bytes);
      t.copy_(saved);
      in = in.subspan(sizeof bytes + bytes);
    };
    if (buffers_.numel() > 0) get(buffers_.tensor(), "the buffers");
    for (const detail::Named& b : kept_) get(b.tensor, "buffer '" + b.name + "'");
    if (!in.empty())
      throw std::runtime_error("cocod::torch::ModuleModel: the saved state holds " + std::to_string(in.size()) +
                               " bytes more than this module's buffers: is it the same module?");
  }

  // ---- the module --------------------------------------------------------------------------------

  /// The module, whose parameters are the live ones (for evaluation, saving with torch::save...).
  [[nodiscard]] Net& net() noexcept { return net_; }
  [[nodiscard]] const Net& net() const noexcept { return net_; }
  /// The flat tensor of the trainable parameters (what parameters() spans).
  [[nodiscard]] const ::torch::Tensor& flat_parameters() const noexcept { return parameters_.tensor(); }
  /// The trainable parameters, in the order of the flat tensor, with their offsets into it.
  [[nodiscard]] std::vector<std::pair<std::string, std::int64_t>> layout() const {
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (std::size_t i = 0; i < parameters_.tensors().size(); ++i)
      out.emplace_back(parameters_.tensors()[i].name, parameters_.offset(i));
    return out;
  }
  /// The workers compare it at begin() (DistributedError on every worker when it differs): every
  /// parameter's and buffer's name, shape and type, and the frozen parameters' values.
  [[nodiscard]] std::uint64_t layout_fingerprint() const {
    return detail::LayoutHash{}.add(parameters_.tensors()).add(frozen_, true).add(buffers_.tensors()).add(kept_).value();
  }
  /// How many parameter gradients autograd did not write in place, so that they were copied
  /// (0 unless the loss resets or assigns a parameter's .grad() itself).
  [[nodiscard]] std::size_t gradient_copies() const noexcept { return copies_; }
  /// Whether each step puts the whole module in training mode (true, the default). false leaves
  /// the modes as you set them, e.g. a BatchNorm kept in eval() while the rest trains.
  void train_each_step(bool on) noexcept { train_each_step_ = on; }

 private:
  static constexpr ::torch::ScalarType dtype() noexcept { return c10::CppTypeToScalarType<T>::value; }
  ::torch::nn::Module& module() { return *net_; }
  static std::span<T> span(const detail::Flat& f) noexcept {
    if (f.numel() == 0) return {};
    return {f.tensor().template data_ptr<T>(), static_cast<std::size_t>(f.numel())};
  }
  // A buffer that counts (BatchNorm's num_batches_tracked): never averaged.
  static bool counter(const std::string& name) {
    const std::string last = name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);
    return last == "num_batches_tracked";
  }
  static std::string shape(const ::torch::Tensor& t) {
    std::string s = "[";
    for (std::int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
    return s + "]";
  }
  [[noreturn]] static void fail(const std::string& what) {
    throw std::invalid_argument("cocod::torch::ModuleModel: " + what);
  }
  static void check_cpu(const std::string& what, const ::torch::Tensor& t) {
    if (!t.device().is_cpu())
      fail(what + " is on " + t.device().str() + ": the adapter drives CPU tensors (move the module and the data "
                                                 "with .to(torch::kCPU))");
  }
  static void check_scalar(const char* kind, const detail::Named& p) {
    check_cpu(std::string(kind) + " '" + p.name + "'", p.tensor);
    if (p.tensor.scalar_type() != dtype())
      fail(std::string(kind) + " '" + p.name + "' is " + c10::toString(p.tensor.scalar_type()) + "; every parameter must be " +
           c10::toString(dtype()) + " (convert the module with ->to(torch::k" + c10::toString(dtype()) +
           "), or adapt it as ModuleModel<Net, Loss, " + (std::is_same_v<T, float> ? "double" : "float") + ">)");
  }
  // cocod updates the flat tensors: a parameter or buffer moved out of them (torch::load into the
  // module, module->to(another type or device), a second adapter of the same module) would train
  // or average nothing. Checked at every step (one pointer per tensor).
  void check_seated() const {
    auto check = [](const detail::Flat& f, const char* kind) {
      const auto* base = static_cast<const std::byte*>(f.numel() > 0 ? f.tensor().data_ptr() : nullptr);
      for (std::size_t i = 0; i < f.tensors().size(); ++i) {
        const ::torch::Tensor& t = f.tensors()[i].tensor;
        if (t.data_ptr() != base + f.offset(i) * static_cast<std::int64_t>(sizeof(T)))
          throw std::logic_error(std::string("cocod::torch::ModuleModel: ") + kind + " '" + f.tensors()[i].name +
                                 "' no longer lives in the adapter's flat tensor (torch::load into the module, "
                                 "->to() another type or device, or a second adapter of the module moved it): load "
                                 "weights before adapting the module, and adapt it once");
      }
    };
    check(parameters_, "parameter");
    check(buffers_, "buffer");
  }
  void seat_gradients(const ::torch::Tensor& g) {
    for (std::size_t i = 0; i < parameters_.tensors().size(); ++i)
      parameters_.tensors()[i].tensor.mutable_grad() = parameters_.view(g, i);
  }

  Net net_;
  ::torch::Tensor inputs_, targets_;
  Loss loss_;
  detail::Flat parameters_, buffers_;
  std::vector<detail::Named> kept_, frozen_;
  std::vector<std::int64_t> index_;
  std::size_t copies_ = 0;
  bool train_each_step_ = true;
};

/// Builds a ModuleModel of float parameters: `cocod::torch::make_model(net, inputs, targets, loss)`.
template <class Net, class Loss>
[[nodiscard]] ModuleModel<Net, Loss> make_model(Net net, ::torch::Tensor inputs, ::torch::Tensor targets, Loss loss) {
  return ModuleModel<Net, Loss>(std::move(net), std::move(inputs), std::move(targets), std::move(loss));
}

}  // namespace cocod::torch
