#pragma once
// The run that the checkpoint seeds are saved from and that fuzz_checkpoint_resume resumes:
// both must agree on the model, the options and the algorithm's name, or every seed would be
// refused at its header and the fuzzer would never reach the sections behind it.
// The algorithms' headers, not <cocod.hpp>: it brings comm::Threads, whose code clang 14
// (the libFuzzer toolchain of Debian 12) cannot compile, and no target needs it.
#include <cocod/algorithm/cocod_sgd.hpp>
#include <cocod/algorithm/delayed_diloco.hpp>
#include <cocod/algorithm/local_sgd.hpp>
#include <cocod/algorithm/pipe_sgd.hpp>
#include <cocod/algorithm/sync_sgd.hpp>
#include <cocod/checkpoint/session.hpp>
#include <cocod/comm/local.hpp>
#include <cocod/errors.hpp>
#include <cocod/schedule/adaptive.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "support.hpp"

namespace cocod_fuzz {

using Model = cocod_test::LeastSquares<double>;
using Comm = cocod::comm::Local;

// Few parameters and samples keep every seed at a few hundred bytes and every execution short.
inline Model model() { return Model(6, 3, 17); }
inline cocod::Options options() { return cocod::Options{.learning_rate = 0.05, .period = 2, .batch_size = 2, .seed = 5}; }
// momentum > 0: the update's velocity is saved, so its section is read too.
inline cocod::update::Sgd sgd() { return cocod::update::Sgd{.momentum = 0.9}; }
// Room for the adaptive schedule's first re-plan (after round 3) and a round beyond the seeds.
inline constexpr std::size_t total_steps = 14;

/// CoCoD-SGD with the schedule that measures: its window's state is saved too.
using Adaptive = cocod::Optimizer<Model, Comm, cocod::schedule::Adaptive<>>;

/// Calls f.template operator()<Algorithm>() for the algorithm called `name` (CoCoD-SGD for any
/// other name: the resume then refuses the file at its header, which is worth reaching too),
/// `adaptive`: CoCoD-SGD with schedule::Adaptive.
template <class F>
void with_algorithm(std::string_view name, bool adaptive, F&& f) {
  if (adaptive)
    f.template operator()<Adaptive>();
  else if (name == cocod::SyncSGD<Model, Comm>::name)
    f.template operator()<cocod::SyncSGD<Model, Comm>>();
  else if (name == cocod::LocalSGD<Model, Comm>::name)
    f.template operator()<cocod::LocalSGD<Model, Comm>>();
  else if (name == cocod::PipeSGD<Model, Comm>::name)
    f.template operator()<cocod::PipeSGD<Model, Comm>>();
  else if (name == cocod::DelayedDiLoCo<Model, Comm>::name)
    f.template operator()<cocod::DelayedDiLoCo<Model, Comm>>();
  else
    f.template operator()<cocod::Optimizer<Model, Comm>>();
}

}  // namespace cocod_fuzz
