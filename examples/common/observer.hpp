#pragma once
// What the examples wrap around a model and a run: a slowed worker, and the callback that draws
// the progress bar, writes the per-round CSV and keeps snapshots of the model for the curve.
// Example code, not part of the library.
#include <cocod.hpp>
#include <cocod/callbacks/progress_bar.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

namespace example {

/// A model whose worker is `factor` times slower: after each gradient it sleeps factor - 1
/// times the time the gradient took (sleeping uses no CPU, like a slower device would not).
template <class M>
struct Slowed {
  M inner;
  double factor = 1.0;
  decltype(auto) parameters() { return inner.parameters(); }
  [[nodiscard]] std::size_t num_samples() const { return static_cast<std::size_t>(inner.num_samples()); }
  double loss_and_gradient(std::span<const std::size_t> batch, cocod::span_of_t<M> g) {
    const auto t0 = std::chrono::steady_clock::now();
    const double loss = static_cast<double>(inner.loss_and_gradient(batch, g));
    if (factor > 1.0) std::this_thread::sleep_for((factor - 1.0) * (std::chrono::steady_clock::now() - t0));
    return loss;
  }
};

/// A worker's parameters at one moment of a run and its batch size then (its weight in the
/// consensus), for the curve of metrics against wall time.
template <class M>
struct Snapshot {
  double wall_s = 0, epoch = 0, batch = 0;
  cocod::backend::buffer<cocod::backend_of_model_t<M>, cocod::scalar_of_t<M>> x;
};

/// The example's callback: the progress bar, the CSV log and the snapshots, each when asked for.
template <class M>
struct Observer {
  std::optional<cocod::callbacks::ProgressBar> bar;
  std::optional<cocod::callbacks::CsvLogger> csv;
  M* model = nullptr;  // snapshots of it every `every` epochs, when set
  // What a snapshot holds: this worker's share of the consensus (Trainer::consensus_share),
  // when set; else the model's parameters.
  std::function<void(decltype(cocod::as_span(std::declval<M&>().parameters())))> share;
  bool every_rank = true;  // on every worker (for the consensus curve), else on rank 0 only
  double every = 0.5;
  std::vector<Snapshot<M>> snapshots;
  std::chrono::steady_clock::time_point start{};
  double next = 0;
  std::size_t total_steps = 0;

  void on_begin(const cocod::RunInfo& info) {
    if (bar) bar->on_begin(info);
    if (csv) csv->on_begin(info);
    start = std::chrono::steady_clock::now();
    next = every;
    total_steps = info.total_steps;
    if (info.rank != 0 && !every_rank) model = nullptr;
  }
  void on_round(const cocod::RoundStats& r) {
    if (bar) bar->on_round(r);
    if (csv) csv->on_round(r);
    // (the last round's point is the consensus model, added after the run)
    if (!model || r.epoch + 1e-9 < next || r.first_step + r.steps >= total_steps) return;
    while (next <= r.epoch + 1e-9) next += every;
    auto x = cocod::as_span(model->parameters());
    Snapshot<M>& s = snapshots.emplace_back();
    s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    s.epoch = r.epoch;
    s.batch = static_cast<double>(r.batch_size);
    s.x.resize(x.size());
    if (share) share(s.x.span());
    else cocod::backend::copy(cocod::backend_of_model_t<M>{}, s.x.span(), x);
  }
  void on_end(const cocod::Report& report) {
    if (bar) bar->on_end(report);
    if (csv) csv->on_end(report);
  }
};

}  // namespace example
