#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/algorithm/detail/run_checks.hpp is internal: include <cocod.hpp>"
#endif
// The checks of an algorithm's Model and Comm where a user names the algorithm: each mistake
// gets one message that says what is wrong and how to fix it, and nothing else fails after it.
// A model or communicator that fails its check is replaced, for the rest of the compilation,
// by stand-ins (a float host model, comm::Local) so that no second error follows the first.
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

#include "cocod/backend/tags.hpp"
#include "cocod/comm/communicator.hpp"
#include "cocod/comm/local.hpp"
#include "cocod/model/concepts.hpp"

namespace cocod::detail {

/// Scalar, backend and span of a model's parameters; float on the host for a type that is no
/// model (after its error).
template <class M>
struct model_types {
  using scalar = float;
  using backend = backend::cpu;
  using span = std::span<float>;
};
template <model_requirements::returns_buffer M>
struct model_types<M> : model_requirements::traits_of<M> {};

/// Calls into the model, or into nothing for a type that is no model (after its error).
template <class M>
struct ModelCalls {
  static constexpr bool valid = cocod::Model<M>;
  using Span = typename model_types<M>::span;

  static Span parameters(M& m) {
    if constexpr (valid) return as_span(m.parameters());
    else return Span{};
  }
  static std::size_t num_samples(const M& m) {
    if constexpr (valid) return static_cast<std::size_t>(m.num_samples());
    else return (void)m, 1;
  }
  static double loss_and_gradient(M& m, std::span<const std::size_t> batch, Span g) {
    if constexpr (valid) return static_cast<double>(m.loss_and_gradient(batch, g));
    else return (void)m, (void)batch, (void)g, 0.0;
  }
};

template <class C, class Span>
concept moves = requires(C& c, Span s) {
  c.broadcast(s, 0);
  c.all_reduce(s);
  c.all_reduce_async(s);
};

/// The communicator the run uses: Comm, or comm::Local after Comm's error.
template <class Model, class Comm>
struct RunChecks {
  static_assert((check_model<Model>(), true));  // check_model's own message, and only that
  static_assert(comm::Communicator<Comm>,
                "cocod: Comm must satisfy cocod::comm::Communicator: rank(), size(), broadcast(span, root), "
                "all_reduce(span), all_reduce_async(span) -> Request for float and double spans (see "
                "cocod/comm/communicator.hpp)");
  static_assert(!comm::Communicator<Comm> || moves<Comm, typename model_types<Model>::span>,
                "cocod: Comm cannot move buffers of this model's backend (device parameters need a "
                "communicator with device_span overloads, such as comm::Threads with <cocod/backend/cuda.hpp>)");
  using communicator =
      std::conditional_t<comm::Communicator<Comm> && moves<Comm, typename model_types<Model>::span>, Comm, comm::Local>;

  static communicator make(Comm&& c) {
    if constexpr (std::is_same_v<communicator, Comm>) return std::move(c);
    else return (void)c, comm::Local{};
  }
};

}  // namespace cocod::detail
