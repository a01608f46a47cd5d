#pragma once
#if !defined(COCOD_INTERNAL_INCLUDE)
#error "cocod/comm/detail/mpi/environment.hpp is internal: include <cocod/comm/mpi.hpp>"
#endif
// MPI itself for comm::Mpi: initializing and finalizing it, datatypes, thread levels, errors;
// through Boost.MPI or, with COCOD_MPI_BOOST=0, the MPI C API alone (see <cocod/comm/mpi.hpp>).
#ifndef COCOD_MPI_BOOST
#define COCOD_MPI_BOOST 1
#endif
#if COCOD_MPI_BOOST
#include <boost/mpi/communicator.hpp>
#include <boost/mpi/datatype.hpp>
#include <boost/mpi/environment.hpp>
#endif
#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "cocod/errors.hpp"

namespace cocod::comm::mpi_detail {

template <class T>
MPI_Datatype datatype() {
#if COCOD_MPI_BOOST
  return boost::mpi::get_mpi_datatype<T>();
#else
  return std::is_same_v<T, double> ? MPI_DOUBLE : MPI_FLOAT;
#endif
}

/// Initializes MPI with MPI_THREAD_MULTIPLE unless it already is, and finalizes what it
/// initialized. With an uncaught exception in flight it aborts the job instead (no rank hangs).
#if COCOD_MPI_BOOST
class Environment {
 public:
  Environment(int& argc, char**& argv) : env_(argc, argv, boost::mpi::threading::multiple, true) {}

 private:
  boost::mpi::environment env_;
};
#else
class Environment {
 public:
  Environment(int& argc, char**& argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    int provided = 0;
    check_init(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    owner_ = true;
  }
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
  ~Environment() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!owner_ || finalized) return;
    if (std::uncaught_exceptions() > 0) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
  }

 private:
  static void check_init(int code) {
    if (code != MPI_SUCCESS) throw MpiError("cocod::comm::Mpi: MPI_Init_thread failed");
  }
  bool owner_ = false;
};
#endif

/// Keeps `environment` until the process exits, for a comm::Mpi constructor that failed after
/// making it. Destroyed while the constructor's exception unwinds, the environment that
/// initialized MPI would abort the job there (above), before anyone could catch the exception
/// and report it. MPI is initialized once per process, so one is kept: any other environment was
/// made when MPI was initialized already, and finalizes nothing. The kept one finalizes at exit.
inline void keep_until_exit(std::shared_ptr<Environment> environment) noexcept {
  static std::mutex mutex;
  static std::shared_ptr<Environment> kept;
  std::lock_guard lock(mutex);
  if (!kept) kept = std::move(environment);
}

inline const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

/// Ends every process of the job with `code` after printing "cocod: rank R failed: <message>".
[[noreturn]] inline void abort_job(const std::string& message, int code = 1) {
  int rank = -1, initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "cocod: rank %d failed: %s\n", rank, message.c_str());
  std::fflush(stderr);
  // Launchers forward output through their own processes; MPICH's hydra can end the job before
  // it forwarded the message above. A moment's grace keeps the reason visible.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

inline void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw MpiError(std::string("cocod::comm::Mpi: ") + what + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

}  // namespace cocod::comm::mpi_detail
