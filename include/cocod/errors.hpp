#pragma once
// The exceptions cocod throws besides std::invalid_argument (bad hyperparameters).
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

}  // namespace cocod
