// The device backend (backend::cuda) run on the host through Thrust's OMP device system: the
// same test bodies over host parameters (std::vector, Eigen kernels) and device parameters
// (thrust::device_vector, Thrust kernels) must agree within float tolerance, for every kernel,
// algorithm and communicator. Built with -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP.
#include <doctest/doctest.h>

#include <cocod.hpp>
#include <cocod/backend/cuda.hpp>

#include <thrust/device_vector.h>
#include <thrust/version.h>

#include <cmath>
#include <vector>

#include "support_device.hpp"

namespace {
static_assert(THRUST_MAJOR_VERSION >= 2, "tests must use CCCL's Thrust, not Debian's 1.x");

template <class T>
using DeviceLeastSquares = cocod_test::DeviceLeastSquares<T>;
template <class T>
struct HostLeastSquares : cocod_test::LeastSquares<T> {
  using cocod_test::LeastSquares<T>::LeastSquares;
  std::vector<T> values() const { return this->x; }
};

static_assert(std::is_same_v<cocod::backend_of_model_t<DeviceLeastSquares<float>>, cocod::backend::cuda>);
static_assert(std::is_same_v<cocod::span_of_t<DeviceLeastSquares<float>>, cocod::device_span<float>>);
static_assert(std::is_same_v<cocod::backend_of_model_t<HostLeastSquares<float>>, cocod::backend::cpu>);

template <class T>
void check_close(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])) / (1e-6 + std::abs(double(b[i]))));
  CHECK(worst <= tol);
}

template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed) {
  cocod::Rng rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(rng.uniform() * 2 - 1);
  return v;
}
}  // namespace

TEST_CASE_TEMPLATE("each device kernel equals its CPU twin", T, float, double) {
  const std::size_t n = 5003;  // not a multiple of any block
  using cocod::backend::cpu;
  using cocod::backend::cuda;
  for (int rule = 0; rule < 6; ++rule) {
    const T mu = rule < 2 ? T(0) : T(0.9), lambda = rule % 2 ? T(0.01) : T(0);
    const bool nesterov = rule >= 4;
    auto x = random_vector<T>(n, 1), g = random_vector<T>(n, 2), v = random_vector<T>(n, 3);
    thrust::device_vector<T> dx(x.begin(), x.end()), dg(g.begin(), g.end()), dv(v.begin(), v.end());
    for (int step = 0; step < 3; ++step) {
      cocod::backend::local_update(cpu{}, std::span<T>(x), std::span<const T>(g), std::span<T>(v), T(0.1), mu, lambda, nesterov);
      cocod::backend::local_update(cuda{}, cocod::as_span(dx), cocod::device_span<const T>(cocod::as_span(dg)),
                                   cocod::as_span(dv), T(0.1), mu, lambda, nesterov);
    }
    CAPTURE(rule);
    check_close(std::vector<T>(dx.begin(), dx.end()), x);
    if (mu != T(0)) check_close(std::vector<T>(dv.begin(), dv.end()), v);
  }
  auto x = random_vector<T>(n, 4), a = random_vector<T>(n, 5), s = random_vector<T>(n, 6);
  thrust::device_vector<T> dx(x.begin(), x.end()), da(a.begin(), a.end()), ds(s.begin(), s.end());
  cocod::backend::round_end(cpu{}, std::span<T>(x), std::span<T>(a), std::span<T>(s), T(0.25));
  cocod::backend::round_end(cuda{}, cocod::as_span(dx), cocod::as_span(da), cocod::as_span(ds), T(0.25));
  check_close(std::vector<T>(dx.begin(), dx.end()), x);
  check_close(std::vector<T>(da.begin(), da.end()), a);
  check_close(std::vector<T>(ds.begin(), ds.end()), s);
  CHECK(std::vector<T>(da.begin(), da.end()) == std::vector<T>(dx.begin(), dx.end()));

  T values[2] = {T(1.5), T(-2)}, back[2] = {};
  cocod::backend::store(cuda{}, cocod::as_span(ds), n - 2, values);
  cocod::backend::load(cuda{}, cocod::device_span<const T>(cocod::as_span(ds)), n - 2, std::span<T>(back));
  CHECK(back[0] == T(1.5));
  CHECK(back[1] == T(-2));
}

namespace {

template <template <class...> class Algorithm, template <class> class Flavor, class T, class Comm>
std::vector<T> train(Comm comm, const cocod_test::Setup& o) {
  Flavor<T> model(120, 13, 40 + static_cast<std::uint64_t>(comm.rank()));
  auto opt = cocod_test::make<Algorithm<Flavor<T>, Comm>>(comm, o);
  opt.optimize(model, cocod::Steps{23});
  return model.values();
}

template <template <class...> class Algorithm, class T>
void compare_flavors(int workers, void (*edit)(cocod_test::Setup&) = nullptr) {
  cocod_test::Setup o{{.learning_rate = 0.02, .period = 3, .batch_size = 6,
                       .speeds = std::vector<double>(static_cast<std::size_t>(workers), 1.0), .seed = 8},
                      {.momentum = 0.9, .weight_decay = 1e-3}};
  if (edit) edit(o);
  std::vector<T> host, device;
  cocod::comm::Threads::run(workers, [&](cocod::comm::Threads comm) {
    auto h = train<Algorithm, HostLeastSquares, T>(comm, o);
    auto d = train<Algorithm, DeviceLeastSquares, T>(comm, o);
    if (comm.rank() == 0) {
      host = std::move(h);
      device = std::move(d);
    }
  });
  check_close(device, host);
  CHECK(device != HostLeastSquares<T>(120, 13, 40).values());  // it trained
}
}  // namespace

TEST_CASE_TEMPLATE("every algorithm trains device parameters like host parameters (comm::Threads, staged)", T, float,
                   double) {
  for (int workers : {1, 3}) {
    CAPTURE(workers);
    compare_flavors<cocod::Optimizer, T>(workers);
    compare_flavors<cocod::SyncSGD, T>(workers);
    compare_flavors<cocod::LocalSGD, T>(workers);
    compare_flavors<cocod::PipeSGD, T>(workers);
  }
}

TEST_CASE_TEMPLATE("the family's rules train device parameters like host parameters", T, float, double) {
  for (int workers : {1, 3}) {
    CAPTURE(workers);
    compare_flavors<cocod::OverlapLocalSGD, T>(workers, [](cocod_test::Setup& o) { o.pull.anchor_momentum = 0.5; });
    compare_flavors<cocod::LocalSGD, T>(workers, [](cocod_test::Setup& o) { o.outer = cocod::Outer::diloco(); });
    compare_flavors<cocod::Optimizer, T>(workers, [](cocod_test::Setup& o) {
      o.outer = cocod::Outer::diloco();
      o.fragments.count = 3;
    });
    compare_flavors<cocod::Optimizer, T>(workers, [](cocod_test::Setup& o) {
      o.fragments = {.count = 2, .merge = cocod::FragmentMerge::lerp};
      o.compress = {cocod::Compression::int8, 8};
    });
    compare_flavors<cocod::LocalSGD, T>(workers, [](cocod_test::Setup& o) { o.compress.format = cocod::Compression::bf16; });
  }
  // each new kernel equals its CPU twin
  using cocod::backend::cpu;
  using cocod::backend::cuda;
  const std::size_t n = 37;
  auto z = random_vector<T>(n, 11), a = random_vector<T>(n, 12), b = random_vector<T>(n, 13), x = random_vector<T>(n, 14);
  thrust::device_vector<T> dz(z.begin(), z.end()), da(a.begin(), a.end()), db(b.begin(), b.end()), dx(x.begin(), x.end());
  auto cd = [](thrust::device_vector<T>& v) { return cocod::device_span<const T>(cocod::as_span(v)); };
  cocod::backend::outer_step(cpu{}, std::span<T>(z), std::span<const T>(a), std::span<T>(b), T(0.7), T(0.9), true, false);
  cocod::backend::outer_step(cuda{}, cocod::as_span(dz), cd(da), cocod::as_span(db), T(0.7), T(0.9), true, false);
  check_close(std::vector<T>(dz.begin(), dz.end()), z);
  check_close(std::vector<T>(db.begin(), db.end()), b);
  cocod::backend::add_back(cpu{}, std::span<T>(x), std::span<const T>(a), std::span<const T>(z));
  cocod::backend::add_back(cuda{}, cocod::as_span(dx), cd(da), cd(dz));
  check_close(std::vector<T>(dx.begin(), dx.end()), x);
  cocod::backend::lerp(cpu{}, std::span<T>(x), std::span<const T>(z), T(0.3));
  cocod::backend::lerp(cuda{}, cocod::as_span(dx), cd(dz), T(0.3));
  check_close(std::vector<T>(dx.begin(), dx.end()), x);
  cocod::backend::pull_back(cpu{}, std::span<T>(x), std::span<const T>(z), std::span<T>(b), std::span<T>(a), T(0.2), T(0.7), T(0.25));
  cocod::backend::pull_back(cuda{}, cocod::as_span(dx), cd(dz), cocod::as_span(db), cocod::as_span(da), T(0.2), T(0.7), T(0.25));
  check_close(std::vector<T>(dx.begin(), dx.end()), x);
  check_close(std::vector<T>(db.begin(), db.end()), b);
  check_close(std::vector<T>(da.begin(), da.end()), a);
  cocod::backend::snapshot(cpu{}, std::span<T>(a), std::span<T>(b), std::span<const T>(x), T(0.5));
  cocod::backend::snapshot(cuda{}, cocod::as_span(da), cocod::as_span(db), cd(dx), T(0.5));
  check_close(std::vector<T>(da.begin(), da.end()), a);
  check_close(std::vector<T>(db.begin(), db.end()), b);
}

namespace {
template <class M, class C>
using LocalClippedAdamW = cocod::LocalSGD<M, C, cocod::schedule::Fixed<>, cocod::update::ClipGradNorm<cocod::update::AdamW>>;
template <class M, class C>
using CoCoDAdam = cocod::CoCoDSGD<M, C, cocod::schedule::Fixed<>, cocod::update::Adam>;
}  // namespace

TEST_CASE_TEMPLATE("Adam, AdamW and clipping train device parameters like host parameters", T, float, double) {
  for (int workers : {1, 3}) {
    CAPTURE(workers);
    compare_flavors<LocalClippedAdamW, T>(workers, [](cocod_test::Setup& o) { o.adamw.weight_decay = 0.05; });
    compare_flavors<CoCoDAdam, T>(workers, [](cocod_test::Setup& o) { o.adam.weight_decay = 1e-3; });
  }
  using cocod::backend::cpu;
  using cocod::backend::cuda;
  const std::size_t n = 5003;
  for (const bool decoupled : {false, true}) {
    CAPTURE(decoupled);
    auto x = random_vector<T>(n, 21), g = random_vector<T>(n, 22);
    std::vector<T> m(n, T(0)), v(n, T(0));
    thrust::device_vector<T> dx(x.begin(), x.end()), dg(g.begin(), g.end()), dm(n, T(0)), dv(n, T(0));
    for (std::uint64_t step = 1; step <= 3; ++step) {
      cocod::backend::adam_update(cpu{}, std::span<T>(x), std::span<const T>(g), std::span<T>(m), std::span<T>(v), 0.01, 0.9,
                                  0.999, 1e-8, 0.01, decoupled, step);
      cocod::backend::adam_update(cuda{}, cocod::as_span(dx), cocod::device_span<const T>(cocod::as_span(dg)), cocod::as_span(dm),
                                  cocod::as_span(dv), 0.01, 0.9, 0.999, 1e-8, 0.01, decoupled, step);
    }
    check_close(std::vector<T>(dx.begin(), dx.end()), x);
    check_close(std::vector<T>(dm.begin(), dm.end()), m);
    check_close(std::vector<T>(dv.begin(), dv.end()), v);
    const T host = cocod::backend::squared_norm(cpu{}, std::span<const T>(g));
    const T device = cocod::backend::squared_norm(cuda{}, cocod::device_span<const T>(cocod::as_span(dg)));
    CHECK(double(device) == doctest::Approx(double(host)).epsilon(1e-5));
  }
}

TEST_CASE("device parameters on comm::Local and on a throttled link") {
  const cocod_test::Setup o{{.learning_rate = 0.05, .period = 4, .batch_size = 5}};
  check_close(train<cocod::Optimizer, DeviceLeastSquares, float>(cocod::comm::Local{}, o),
              train<cocod::Optimizer, HostLeastSquares, float>(cocod::comm::Local{}, o));
  std::vector<double> host, device;
  cocod::comm::Threads::run(2, [&](cocod::comm::Threads inner) {
    cocod::comm::Throttled<cocod::comm::Threads> comm{inner, {.latency = 1e-4, .bandwidth = 1e9}};
    auto h = train<cocod::PipeSGD, HostLeastSquares, double>(comm, o);
    auto d = train<cocod::PipeSGD, DeviceLeastSquares, double>(comm, o);
    if (inner.rank() == 1) {
      host = h;
      device = d;
    }
  });
  check_close(device, host);
}
