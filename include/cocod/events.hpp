#pragma once
// What a run decided, told as it happens: a sink a user sets on a trainer (none by default, so
// the library prints nothing), and a ready-made sink that prints each event as one line.
#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>

namespace cocod {

/// One decision of a run, on the worker that made it (every worker makes the same ones).
struct Event {
  enum class Kind {
    resumed,             ///< the run continued from a checkpoint (`path`)
    checkpoint_written,  ///< this worker's file of a checkpoint, and the manifest, are written (`path`, `bytes`, `seconds`)
    replanned,           ///< a measuring schedule changed the plan (`old_*` -> `new_*`, from `sample_s` and `exchange_s`)
    skipped,             ///< a reduction's non-finite contribution was skipped (NonFinite::skip)
  };
  Kind kind = Kind::resumed;
  int rank = 0;
  std::size_t round = 0;  ///< the round it happened in
  std::size_t step = 0;   ///< steps taken then
  std::string message{};  ///< the event in words, one line ("checkpoint written: ...")
  std::string path{};     ///< resumed, checkpoint_written: the checkpoint's folder
  double bytes = 0.0;     ///< checkpoint_written: this worker's file
  double seconds = 0.0;   ///< checkpoint_written: from the start of the save to the manifest
  std::size_t old_period = 0, new_period = 0;                ///< replanned: k before and after
  std::size_t old_hiding_steps = 0, new_hiding_steps = 0;    ///< replanned: the steps one exchange takes
  std::size_t old_batch_size = 0, new_batch_size = 0;        ///< replanned: this worker's M_i
  double sample_s = 0.0;    ///< replanned: the measured compute per sample of the slowest worker
  double exchange_s = 0.0;  ///< replanned: the measured time of one exchange (the fastest worker's, with its margin)
};

/// Where a trainer tells its events (Trainer::on_event); empty: nowhere.
using EventSink = std::function<void(const Event&)>;

namespace events {

/// A sink that prints each event as one line: "cocod [rank 0] round 12 (step 48): checkpoint
/// written: ckpt/round-000000000012, 1.200 MB (this worker's file) in 0.031 s". Rank 0's only,
/// unless `every_rank`.
class Printer {
 public:
  explicit Printer(std::FILE* out = stderr, bool every_rank = false) : out_(out), every_rank_(every_rank) {}
  void operator()(const Event& e) const {
    if (e.rank != 0 && !every_rank_) return;
    std::fprintf(out_, "cocod [rank %d] round %zu (step %zu): %s\n", e.rank, e.round, e.step, e.message.c_str());
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  bool every_rank_;
};

}  // namespace events
}  // namespace cocod
