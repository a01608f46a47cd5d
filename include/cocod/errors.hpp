#pragma once
// The exceptions cocod throws, and the one formatter of its std::invalid_argument messages
// (bad hyperparameters and settings name the type, the field, the rule and the value).
#include <sstream>
#include <stdexcept>
#include <string>

namespace cocod {

/// A failure that every worker of a run observes together (a mismatch between workers, an
/// empty shard): raised on every rank, so that no rank is left waiting in a collective.
class DistributedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Raised in a worker whose collective can never complete because another worker failed or
/// left; the failing worker's own exception is the one worth reporting.
class Aborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A NaN or an infinity on some worker (NonFinite::raise, or too many skips): raised on every
/// worker from the same reduction, with the same message naming the ranks, the round, the step
/// and what was non-finite.
class NonFiniteError : public DistributedError {
 public:
  using DistributedError::DistributedError;
};

/// Throws std::invalid_argument("<type>: <field> <rule> (got <value>)"), the form of every
/// validation message: e.g. "cocod::Options: momentum must be in [0, 1) (got 1.5)".
template <class Value>
[[noreturn]] void invalid_setting(const std::string& type, const std::string& field, const std::string& rule,
                                  const Value& got) {
  std::ostringstream os;
  os << type << ": " << field << " " << rule << " (got " << got << ")";
  throw std::invalid_argument(os.str());
}

}  // namespace cocod
