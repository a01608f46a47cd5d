// The local update rules beside SGD: Adam and AdamW against a plain element-by-element
// recomputation to the bit, gradient clipping by the global norm around any rule, their settings'
// checks, and their state in checkpoints.
#include <doctest/doctest.h>

#include <cocod.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "support.hpp"

namespace {
using cocod::backend::cpu;

template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  cocod::Rng rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>((rng.uniform() * 2 - 1) * scale);
  return v;
}

/// `steps` steps of rule U's state on x, with a fresh gradient and another learning rate each step.
template <class T, class U>
std::vector<T> library_steps(const U& rule, std::vector<T> x, int steps) {
  auto state = rule.template start<cpu, T>(x.size());
  for (int s = 0; s < steps; ++s) {
    auto g = random_vector<T>(x.size(), 100 + static_cast<std::uint64_t>(s), s % 2 ? 3.0 : 1e-3);
    state.apply(std::span<T>(x), std::span<T>(g), static_cast<T>(0.01 / (1 + s)));
  }
  return x;
}
template <class T>
std::vector<T> plain_steps(cocod_test::PlainAdam<T> rule, std::vector<T> x, int steps) {
  for (int s = 0; s < steps; ++s)
    rule.apply(x, random_vector<T>(x.size(), 100 + static_cast<std::uint64_t>(s), s % 2 ? 3.0 : 1e-3),
               static_cast<T>(0.01 / (1 + s)));
  return x;
}

template <class U>
std::string refusal(const U& rule) {
  try {
    rule.validate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE_TEMPLATE("Adam and AdamW steps equal a plain element-by-element recomputation, to the bit", T, float, double) {
  const auto x0 = random_vector<T>(1001, 7);  // the CPU pass's blocks of 512: two, the second partial
  for (const double wd : {0.0, 0.01, 0.3}) {
    CAPTURE(wd);
    const cocod::update::AdamW adamw{.beta1 = 0.85, .beta2 = 0.99, .eps = 1e-7, .weight_decay = wd};
    const cocod::update::Adam adam{.weight_decay = wd};
    CHECK(library_steps(adamw, x0, 6) == plain_steps(cocod_test::PlainAdam<T>::of(adamw), x0, 6));
    CHECK(library_steps(adam, x0, 6) == plain_steps(cocod_test::PlainAdam<T>::of(adam), x0, 6));
  }
  // with no decay, Adam and AdamW are one rule
  CHECK(library_steps(cocod::update::Adam{}, x0, 4) == library_steps(cocod::update::AdamW{.weight_decay = 0}, x0, 4));
}

TEST_CASE("AdamW's bias correction: the first step moves every weight by lr, against its gradient's sign") {
  std::vector<double> x(50, 1.0), g = random_vector<double>(50, 3);
  auto state = cocod::update::AdamW{.weight_decay = 0}.start<cpu, double>(x.size());
  state.apply(std::span<double>(x), std::span<double>(g), 0.1);
  for (std::size_t j = 0; j < x.size(); ++j) {
    CAPTURE(j);
    CHECK(x[j] == doctest::Approx(1.0 - 0.1 * (g[j] > 0 ? 1 : -1)).epsilon(1e-6));
  }
  CHECK(state.steps == 1);
  // the decoupled decay shrinks the weights by lr * wd before the step, whatever the gradient
  std::vector<double> y(4, 2.0), zero(4, 0.0);
  auto decayed = cocod::update::AdamW{.weight_decay = 0.5}.start<cpu, double>(4);
  decayed.apply(std::span<double>(y), std::span<double>(zero), 0.1);
  CHECK(y == std::vector<double>(4, 2.0 * (1.0 - 0.1 * 0.5)));
  // reset() forgets the moments and the count: the next step is a first step again
  state.reset();
  CHECK(state.steps == 0);
  std::vector<double> z(50, 1.0);
  state.apply(std::span<double>(z), std::span<double>(g), 0.1);
  CHECK(z[0] == doctest::Approx(1.0 - 0.1 * (g[0] > 0 ? 1 : -1)).epsilon(1e-6));
}

TEST_CASE("ClipGradNorm scales a gradient above max_norm to it, leaves a smaller one, and wraps any rule") {
  using Clipped = cocod::update::ClipGradNorm<cocod::update::Sgd>;
  const std::vector<double> x0(200, 0.5);
  auto g = random_vector<double>(200, 9, 10.0);  // norm about 80
  double norm = 0;
  for (double v : g) norm += v * v;
  norm = std::sqrt(norm);
  REQUIRE(norm > 2.0);
  {  // above: the step is lr times the gradient scaled to norm max_norm
    auto x = x0, gc = g;
    auto state = Clipped{.max_norm = 2.0}.start<cpu, double>(x.size());
    state.apply(std::span<double>(x), std::span<double>(gc), 1.0);
    double moved = 0;
    for (std::size_t j = 0; j < x.size(); ++j) moved += (x0[j] - x[j]) * (x0[j] - x[j]);
    CHECK(std::sqrt(moved) == doctest::Approx(2.0).epsilon(1e-6));
    CHECK((x0[3] - x[3]) / g[3] == doctest::Approx(2.0 / norm).epsilon(1e-6));
  }
  {  // below: the wrapped rule sees the gradient's very bits
    auto x = x0, gc = g, y = x0;
    auto state = Clipped{.max_norm = 1e3, .inner = {.momentum = 0.9}}.start<cpu, double>(x.size());
    auto plain = cocod::update::Sgd{.momentum = 0.9}.start<cpu, double>(y.size());
    state.apply(std::span<double>(x), std::span<double>(gc), 0.1);
    auto g2 = g;
    plain.apply(std::span<double>(y), std::span<double>(g2), 0.1);
    CHECK(x == y);
    CHECK(gc == g);
  }
  {  // around AdamW, in float: the clipped gradient's norm is max_norm
    auto x = std::vector<float>(200, 0.5f), gf = random_vector<float>(200, 9, 10.0);
    auto state = cocod::update::ClipGradNorm<cocod::update::AdamW>{.max_norm = 0.5}.start<cpu, float>(x.size());
    state.apply(std::span<float>(x), std::span<float>(gf), 0.01f);
    CHECK(std::sqrt(cocod::backend::squared_norm(cpu{}, std::span<const float>(gf))) == doctest::Approx(0.5).epsilon(1e-5));
    CHECK(state.inner.steps == 1);
  }
  {  // a finite float gradient whose squares overflow float is clipped, not zeroed
    auto x = std::vector<float>(200, 0.5f), gf = random_vector<float>(200, 9, 1e20);
    REQUIRE(std::isinf(cocod::backend::squared_norm(cpu{}, std::span<const float>(gf))));
    auto state = cocod::update::ClipGradNorm<cocod::update::Sgd>{.max_norm = 0.5}.start<cpu, float>(x.size());
    state.apply(std::span<float>(x), std::span<float>(gf), 1.0f);
    CHECK(std::sqrt(cocod::backend::squared_norm(cpu{}, std::span<const float>(gf))) == doctest::Approx(0.5).epsilon(1e-5));
  }
  {  // a gradient with a NaN is left for the non-finite guard
    auto x = x0, gc = g;
    gc[5] = std::numeric_limits<double>::quiet_NaN();
    auto state = Clipped{.max_norm = 2.0}.start<cpu, double>(x.size());
    state.apply(std::span<double>(x), std::span<double>(gc), 1.0);
    CHECK(gc[4] == g[4]);
    CHECK(std::isnan(x[5]));
  }
}

TEST_CASE("the update rules' settings are checked, naming the type and the field") {
  CHECK(refusal(cocod::update::AdamW{.beta1 = 1.0}) == "cocod::update::AdamW: beta1 must be in [0, 1) (got 1)");
  CHECK(refusal(cocod::update::AdamW{.beta2 = -0.1}) == "cocod::update::AdamW: beta2 must be in [0, 1) (got -0.1)");
  CHECK(refusal(cocod::update::Adam{.eps = 0}) == "cocod::update::Adam: eps must be a finite number > 0 (got 0)");
  CHECK(refusal(cocod::update::Adam{.weight_decay = -1}) ==
        "cocod::update::Adam: weight_decay must be a finite number >= 0 (got -1)");
  CHECK(refusal(cocod::update::ClipGradNorm<>{.max_norm = 0}) ==
        "cocod::update::ClipGradNorm: max_norm must be a finite number > 0 (got 0)");
  CHECK(refusal(cocod::update::ClipGradNorm<cocod::update::AdamW>{.inner = {.eps = -1}}) ==
        "cocod::update::AdamW: eps must be a finite number > 0 (got -1)");
  CHECK(refusal(cocod::update::ClipGradNorm<cocod::update::AdamW>{}).empty());
  // an algorithm checks its update when it is made
  cocod::comm::Local comm;
  using Model = cocod_test::LeastSquares<double>;
  using Opt = cocod::LocalSGD<Model, cocod::comm::Local, cocod::schedule::Fixed<>, cocod::update::AdamW>;
  CHECK_THROWS_WITH_AS(Opt(comm, cocod::Options{}, cocod::update::AdamW{.beta2 = 1.5}),
                       "cocod::update::AdamW: beta2 must be in [0, 1) (got 1.5)", std::invalid_argument);
}
