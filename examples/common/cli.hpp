#pragma once
// The command-line checks shared by the examples and the benchmarks (CLI11): strict numbers with
// ranges, choices and comma-separated lists of choices, and one way to end on a bad command line
// (the message names the flag; exit status 2) or on --help (exit status 0). Example code, not part
// of the library.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace cli {

/// The items of a comma-separated list, empty items dropped.
inline std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}
inline std::string join(const std::vector<std::string>& items, const char* separator = ",") {
  std::string s;
  for (const auto& item : items) s += (s.empty() ? "" : separator) + item;
  return s;
}

inline std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// True when `text` is a decimal whole number in [min, max]; the number in `out`.
inline bool parse_whole(const std::string& text, unsigned long long min, unsigned long long max, unsigned long long& out) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::strtoull(text.c_str(), nullptr, 10);
  return out >= min && out <= max;
}

/// True when `text` is a finite number in [min, max] (above min when `above`, below max when
/// `below`); the number in `out`.
inline bool parse_real(const std::string& text, double min, double max, bool above, bool below, double& out) {
  if (text.empty() || text.find_first_of("xXpP") != std::string::npos) return false;  // no hexadecimal
  char* end = nullptr;
  errno = 0;
  out = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(out)) return false;
  return (above ? out > min : out >= min) && (below ? out < max : out <= max);
}

inline std::string got(const std::string& text) { return " (got '" + text + "')"; }

/// A whole number in [min, max].
inline CLI::Validator whole(unsigned long long min, unsigned long long max = 1ull << 40) {
  return CLI::Validator(
      [=](std::string& text) {
        unsigned long long v = 0;
        if (parse_whole(text, min, max, v)) return std::string();
        return "needs a whole number from " + std::to_string(min) + " to " + std::to_string(max) + got(text);
      },
      "");
}

/// A finite number in [min, max]; `above`: > min, `below`: < max (positive: real(0, max, true)).
inline CLI::Validator real(double min, double max = 1e15, bool above = false, bool below = false) {
  return CLI::Validator(
      [=](std::string& text) {
        double v = 0;
        if (parse_real(text, min, max, above, below, v)) return std::string();
        if (above && min == 0 && max >= 1e15) return "needs a positive number" + got(text);
        return "needs a number " + std::string(above ? "> " : ">= ") + number_text(min) + " and " +
               (below ? "< " : "<= ") + number_text(max) + got(text);
      },
      "");
}
inline CLI::Validator positive(double max = 1e15) { return real(0, max, true); }

/// Why `path` cannot be opened for writing, by trying it (permissions alone do not tell: root may
/// write anywhere that allows writing at all, and /proc allows nothing); empty when it can. A
/// file that did not exist is removed again, and one that did is not changed.
inline std::string write_probe(const std::string& path) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | (existed ? 0 : O_CREAT | O_EXCL), 0644);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
  return {};
}

/// A file that can be written: its folder exists and a file can be made there (or the file can
/// be opened for writing). Checked before training, so that a typo in a path costs no run.
inline CLI::Validator writable_file() {
  return CLI::Validator(
      [](std::string& path) {
        namespace fs = std::filesystem;
        const fs::path file(path);
        const fs::path folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
        std::error_code ec;
        if (fs::is_directory(file, ec)) return "cannot write '" + path + "': it is a folder";
        if (!fs::exists(file, ec) && !fs::is_directory(folder, ec)) return "cannot write '" + path + "': no folder '" + folder.string() + "'";
        const std::string why = write_probe(path);
        return why.empty() ? why : "cannot write '" + path + "': " + why;
      },
      "");
}

/// A folder that can be written, or created: it is a folder in which a file can be made, or the
/// nearest part of the path that exists is one.
inline CLI::Validator writable_folder() {
  return CLI::Validator(
      [](std::string& path) {
        namespace fs = std::filesystem;
        std::error_code ec;
        fs::path p(path);
        if (path.empty()) return std::string("needs a folder");
        if (fs::exists(p, ec) && !fs::is_directory(p, ec)) return "cannot write into '" + path + "': it is not a folder";
        while (!p.empty() && !fs::exists(p, ec)) p = p.has_parent_path() && p.parent_path() != p ? p.parent_path() : fs::path(".");
        const std::string why = write_probe((p / (".cocod-write-probe-" + std::to_string(::getpid()))).string());
        if (!why.empty()) return "cannot write into '" + path + "': '" + p.string() + "': " + why;
        return std::string();
      },
      "");
}

/// One of `choices`.
inline CLI::Validator one_of(std::vector<std::string> choices) {
  return CLI::Validator(
      [=](std::string& text) {
        for (const auto& c : choices)
          if (text == c) return std::string();
        return "needs one of " + join(choices, ", ") + got(text);
      },
      "");
}

/// A comma-separated list of at least one of `choices`.
inline CLI::Validator list_of(std::vector<std::string> choices) {
  return CLI::Validator(
      [=](std::string& text) {
        const auto items = split(text);
        if (items.empty()) return "needs at least one of " + join(choices, ", ") + got(text);
        for (const auto& item : items) {
          bool known = false;
          for (const auto& c : choices) known = known || item == c;
          if (!known) return "unknown '" + item + "' (choose from " + join(choices, ", ") + ")";
        }
        return std::string();
      },
      "");
}

/// What a refused command line gets told: CLI11's message, with the unknown flag named first.
inline std::string describe(const CLI::App& app, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    for (const auto& item : app.remaining())
      if (item.size() > 1 && item[0] == '-') return "unknown option '" + item.substr(0, item.find('=')) + "'";
    if (!app.remaining().empty()) return "unexpected argument '" + app.remaining().front() + "'";
  }
  const std::string what = e.what();
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) && what.ends_with(" missing"))  // "--x: 1 required X missing"
    return what.substr(0, what.find(':')) + ": needs a value";
  return what;
}

/// Prints what a refused command line is told: "PROGRAM: MESSAGE" and where to look.
inline void print_refusal(const std::string& program, const std::string& message) {
  std::fprintf(stderr, "%s: %s\nTry '%s --help'.\n", program.c_str(), message.c_str(), program.c_str());
}

/// Ends on a command line that breaks a rule between flags: "PROGRAM: MESSAGE", exit status 2.
[[noreturn]] inline void refuse(const std::string& program, const std::string& message) {
  print_refusal(program, message);
  std::exit(2);
}

/// Parses the command line. --help prints the help and exits 0; a bad command line prints
/// "PROGRAM: MESSAGE" (the message names the flag) and exits 2.
inline void parse(CLI::App& app, int argc, char** argv) {
  const std::string program = argc > 0 ? argv[0] : app.get_name();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) std::exit(app.exit(e));  // --help
    refuse(program, describe(app, e));
  }
}

/// Options given twice keep the last value, so that a script's later flag overrides an earlier one.
inline void last_value_wins(CLI::App& app) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

}  // namespace cli
