#pragma once
// A progress bar on rank 0: redrawn in place on a terminal, a line per tenth otherwise.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "cocod/report.hpp"

namespace cocod::callbacks {

/// Prints progress of rank 0's run to `out` (stderr by default): percentage, epoch, round, the
/// consensus loss (this worker's round loss until the first consensus arrives), the latest
/// round's wall time and the share of the run so far that rank 0 spent waiting for collectives.
/// On a terminal one line is redrawn; elsewhere a line per tenth of the run.
class ProgressBar {
 public:
  explicit ProgressBar(std::FILE* out = stderr, int width = 30) : out_(out), width_(width) {}

  void on_begin(const RunInfo& info) {
    info_ = info;
    active_ = info.rank == 0 && info.total_steps > 0;
    tty_ = ::isatty(::fileno(out_)) != 0;
    next_tenth_ = 1;
    waited_s_ = rounds_s_ = 0.0;
  }
  void on_round(const RoundStats& s) {
    if (!active_) return;
    waited_s_ += s.wait_s;
    rounds_s_ += s.round_s;
    const std::size_t done = s.first_step + s.steps;
    const double f = std::min(1.0, static_cast<double>(done) / static_cast<double>(info_.total_steps));
    if (!tty_ && f * 10.0 < next_tenth_ && f < 1.0) return;
    while (next_tenth_ <= f * 10.0) ++next_tenth_;
    const int filled = static_cast<int>(std::lround(f * width_));
    std::string bar(static_cast<std::size_t>(filled), '=');
    bar.resize(static_cast<std::size_t>(width_), ' ');
    std::fprintf(out_, "%s%-10s [%s] %3.0f%% epoch %.2f round %zu loss %.4g %.2f ms/round waited %.0f%%%s",
                 tty_ ? "\r" : "", info_.algorithm.c_str(), bar.c_str(), 100.0 * f, s.epoch,
                 s.round, std::isnan(s.consensus_loss) ? s.loss : s.consensus_loss,
                 1e3 * s.round_s, rounds_s_ > 0.0 ? 100.0 * waited_s_ / rounds_s_ : 0.0, tty_ ? "" : "\n");
    std::fflush(out_);
  }
  void on_end(const Report&) {
    if (active_ && tty_) std::fputc('\n', out_);
  }

 private:
  std::FILE* out_;
  int width_;
  RunInfo info_{};
  bool active_ = false;
  bool tty_ = false;
  int next_tenth_ = 1;
  double waited_s_ = 0.0, rounds_s_ = 0.0;  // over the rounds so far
};

}  // namespace cocod::callbacks
