#pragma once
// Writes one CSV row per round.
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include "cocod/report.hpp"

namespace cocod::callbacks {

/// Logs every round to a CSV file. By default only rank 0 writes; with every_rank = true each
/// worker writes its own file, "{rank}" in the path replaced by its rank (or ".rank<r>" added).
/// Columns: algorithm,rank,round,first_step,steps,period,batch_size,epoch,learning_rate,loss,
/// consensus_loss,compute_s,comm_s,wait_s,round_s,skipped,bytes_sent. A write that fails (a full disk) throws
/// std::runtime_error naming the file at the run's end.
class CsvLogger {
 public:
  explicit CsvLogger(std::string path, bool every_rank = false)
      : path_(std::move(path)), every_rank_(every_rank) {}

  void on_begin(const RunInfo& info) {
    algorithm_ = info.algorithm;
    rank_ = info.rank;
    if (!every_rank_ && info.rank != 0) return;
    std::string path = path_;
    if (every_rank_) {
      const auto at = path.find("{rank}");
      if (at != std::string::npos)
        path.replace(at, 6, std::to_string(info.rank));
      else
        path += ".rank" + std::to_string(info.rank);
    }
    out_.open(path, std::ios::out | std::ios::trunc);
    if (!out_) throw std::runtime_error("cocod::callbacks::CsvLogger: cannot open '" + path + "' for writing");
    opened_ = path;
    out_ << "algorithm,rank,round,first_step,steps,period,batch_size,epoch,learning_rate,loss,consensus_loss,"
            "compute_s,comm_s,wait_s,round_s,skipped,bytes_sent\n";
  }
  void on_round(const RoundStats& s) {
    if (!out_.is_open()) return;
    char line[512];
    std::snprintf(line, sizeof line, "%s,%d,%zu,%zu,%zu,%zu,%zu,%.6f,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%zu,%.0f\n",
                  algorithm_.c_str(), rank_, s.round, s.first_step, s.steps, s.period, s.batch_size, s.epoch,
                  s.learning_rate, s.loss, s.consensus_loss, s.compute_s, s.comm_s, s.wait_s,
                  s.round_s, s.skipped, s.bytes_sent);
    out_ << line;
  }
  void on_end(const Report&) {
    if (!out_.is_open()) return;
    out_.flush();
    if (!out_) throw std::runtime_error("cocod::callbacks::CsvLogger: writing '" + opened_ + "' failed (is the disk full?)");
  }

 private:
  std::string path_;
  bool every_rank_;
  std::string algorithm_, opened_;
  int rank_ = 0;
  std::ofstream out_;
};

}  // namespace cocod::callbacks
