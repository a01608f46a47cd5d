#include <doctest/doctest.h>

#include <cocod/schedule/fixed.hpp>

#include <cmath>

TEST_CASE("learning-rate schedules follow their formulas") {
  CHECK(cocod::lr::Constant{}(0.1, 12345, 0) == 0.1);
  const cocod::lr::StepDecay step{.step_size = 10, .gamma = 0.5};
  CHECK(step(1.0, 9, 0) == 1.0);
  CHECK(step(1.0, 10, 0) == 0.5);
  CHECK(step(1.0, 25, 0) == 0.25);
  const cocod::lr::Cosine cosine{.total_steps = 100, .min_lr = 0.01};
  CHECK(cosine(1.0, 0, 0) == doctest::Approx(1.0));
  CHECK(cosine(1.0, 50, 0) == doctest::Approx(0.505));
  CHECK(cosine(1.0, 100, 0) == doctest::Approx(0.01));
  CHECK(cocod::lr::Cosine{}(1.0, 50, 200) == doctest::Approx(0.8535533906));  // run's length
  CHECK_THROWS_AS((void)cocod::lr::Cosine{}(1.0, 0, 0), std::invalid_argument);
  const cocod::lr::Warmup<cocod::lr::StepDecay> warm{.steps = 4, .start_factor = 0.2, .after = {.step_size = 10, .gamma = 0.1}};
  CHECK(warm(1.0, 0, 0) == doctest::Approx(0.2));
  CHECK(warm(1.0, 2, 0) == doctest::Approx(0.6));
  CHECK(warm(1.0, 4, 0) == doctest::Approx(1.0));
  CHECK(warm(1.0, 10, 0) == doctest::Approx(0.1));
  // warm-up from 0, then a cosine over the steps after it
  const cocod::lr::WarmupCosine wc{.warmup_steps = 10, .total_steps = 110, .min_lr = 0.1};
  CHECK(wc(2.0, 0, 0) == 0.0);
  CHECK(wc(2.0, 5, 0) == doctest::Approx(1.0));
  CHECK(wc(2.0, 10, 0) == doctest::Approx(2.0));
  CHECK(wc(2.0, 60, 0) == doctest::Approx(1.05));
  CHECK(wc(2.0, 110, 0) == 0.1);
  CHECK(cocod::lr::WarmupCosine{.warmup_steps = 4, .start_factor = 0.5}(1.0, 2, 20) == doctest::Approx(0.75));
  CHECK(cocod::lr::WarmupCosine{.warmup_steps = 4}(1.0, 12, 20) == doctest::Approx(0.5));  // the run's length
  CHECK_THROWS_WITH_AS((void)cocod::lr::WarmupCosine{.warmup_steps = 40}(1.0, 0, 20),
                       "cocod::lr::WarmupCosine: warmup_steps (40) must be less than the run's 20 steps", std::invalid_argument);
  CHECK_THROWS_WITH_AS(cocod::lr::WarmupCosine({.warmup_steps = 40, .total_steps = 40}).validate(),
                       "cocod::lr::WarmupCosine: warmup_steps must be less than total_steps (got 40)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(cocod::lr::WarmupCosine({.start_factor = 2}).validate(),
                       "cocod::lr::WarmupCosine: start_factor must be in [0, 1] (got 2)", std::invalid_argument);
}

TEST_CASE("the fixed schedule derives batch sizes from speeds") {
  const cocod::schedule::Fixed<> fixed{};
  cocod::Options o{.period = 4, .batch_size = 32};
  CHECK(fixed.plan(o, 0, 3).batch_size == 32);
  CHECK(fixed.plan(o, 0, 3).period == 4);
  o.speeds = {1.0, 2.0, 3.0};  // N * M = 96 split 1:2:3
  CHECK(fixed.plan(o, 0, 3).batch_size == 16);
  CHECK(fixed.plan(o, 1, 3).batch_size == 32);
  CHECK(fixed.plan(o, 2, 3).batch_size == 48);
  o.speeds = {1000.0, 1.0};  // never below one sample
  o.batch_size = 1;
  CHECK(fixed.plan(o, 1, 2).batch_size == 1);
}
