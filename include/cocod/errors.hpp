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

/// Raised in a worker whose collective failed because a peer was lost (its process ended or its
/// connection closed) without leaving an error of its own: comm::Gloo. Elastic training catches
/// it and goes on with the survivors; elsewhere it ends the run like any Aborted.
class PeerLost : public Aborted {
 public:
  using Aborted::Aborted;
};

/// A NaN or an infinity on some worker (NonFinite::raise, or too many skips): raised on every
/// worker from the same reduction, with the same message naming the ranks, the round, the step
/// and what was non-finite.
class NonFiniteError : public DistributedError {
 public:
  using DistributedError::DistributedError;
};

/// A checkpoint that cannot be written or read as it is: the message names the file (or the
/// directory) and what is wrong or differs. The workers agree on it, so it is raised on every
/// worker with the same message (the lowest failing rank's).
class CheckpointError : public DistributedError {
 public:
  using DistributedError::DistributedError;
};

/// A call into the communication library failed on this worker (MPI, NCCL or CUDA returned an
/// error code); the message names the call and the library's reason.
class CommunicationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// An MPI call failed (comm::Mpi).
class MpiError : public CommunicationError {
 public:
  using CommunicationError::CommunicationError;
};
/// An NCCL or CUDA call failed (comm::Nccl).
class NcclError : public CommunicationError {
 public:
  using CommunicationError::CommunicationError;
};

/// Throws std::invalid_argument("<type>: <field> <rule> (got <value>)"), the form of every
/// validation message: e.g. "cocod::Options: period must be >= 1 (got 0)".
template <class Value>
[[noreturn]] void invalid_setting(const std::string& type, const std::string& field, const std::string& rule,
                                  const Value& got) {
  std::ostringstream os;
  os << type << ": " << field << " " << rule << " (got " << got << ")";
  throw std::invalid_argument(os.str());
}

}  // namespace cocod
