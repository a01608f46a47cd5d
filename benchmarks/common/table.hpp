#pragma once
// Output of the benchmarks in the style of nccl-tests: '#' header lines, a units row, fixed-width
// columns, a correctness column, an OK/FAILED footer; the same rows as CSV beside it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

struct Column {
  std::string name, unit;
  int width = 10;
  int precision = 3;  // for numbers; < 0: the cell is text
};

/// Prints rows as they come and keeps them for the CSV file.
class Table {
 public:
  Table(std::string title, std::vector<Column> columns, std::string csv_path = {})
      : columns_(std::move(columns)), csv_path_(std::move(csv_path)) {
    std::printf("# %s\n", title.c_str());
    std::printf("#");
    for (const auto& c : columns_) std::printf(" %*s", c.width, c.name.c_str());
    std::printf("\n#");
    for (const auto& c : columns_) std::printf(" %*s", c.width, c.unit.c_str());
    std::printf("\n");
    std::fflush(stdout);
  }

  /// One row: a text per text column and a number per numeric column, in column order, and
  /// whether the row's result was checked correct.
  void row(const std::vector<std::string>& cells, bool correct) {
    std::printf(" ");
    for (std::size_t i = 0; i < columns_.size(); ++i)
      std::printf(" %*s", columns_[i].width, i < cells.size() ? cells[i].c_str() : "");
    std::printf("\n");
    std::fflush(stdout);
    rows_.push_back(cells);
    all_correct_ = all_correct_ && correct;
  }
  [[nodiscard]] std::string number(std::size_t column, double v) const {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", std::max(0, columns_[column].precision), v);
    return b;
  }

  /// The footer, and the CSV file when one was asked for. Returns the exit status.
  int finish(const std::string& what) {
    std::printf("# %s: %s\n", what.c_str(), all_correct_ ? "OK" : "FAILED (a result was wrong)");
    if (!csv_path_.empty()) {
      std::ofstream out(csv_path_);
      if (!out) throw std::runtime_error("cannot write '" + csv_path_ + "'");
      for (std::size_t i = 0; i < columns_.size(); ++i) out << (i ? "," : "") << columns_[i].name;
      out << '\n';
      for (const auto& r : rows_) {
        for (std::size_t i = 0; i < r.size(); ++i) out << (i ? "," : "") << r[i];
        out << '\n';
      }
      std::printf("# csv: %s\n", csv_path_.c_str());
    }
    return all_correct_ ? 0 : 1;
  }

 private:
  std::vector<Column> columns_;
  std::string csv_path_;
  std::vector<std::vector<std::string>> rows_;
  bool all_correct_ = true;
};

template <class V>
double median(V v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

inline std::string today() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d", std::gmtime(&t));
  return b;
}

}  // namespace bench
