// A rank that throws mid-training must end the whole job quickly, with its message visible.
// Run by ctest through cmake/expect_failure.cmake: mpiexec must exit non-zero, print the failing
// rank's message, and do so within the time limit.
//   test_mpi_abort run        the exception is caught by Mpi::run, which aborts the job
//   test_mpi_abort uncaught   the exception leaves main (std::terminate)
// Set-up failures once MPI is initialized are reported by Mpi::run in the same way:
//   test_mpi_abort options    MpiOptions that comm::Mpi refuses (poll_min > poll_interval)
//   test_mpi_abort thread     the communication thread cannot be started
// And the exit status that fn returns is the job's:
//   test_mpi_abort status     the last rank's fn returns 3
// Ranks that call different sequences of collectives end the job with DistributedError on every
// rank, instead of hanging (rank 1 is the odd one):
//   test_mpi_abort early      rank 1 trains 10 steps, the others 100
//   test_mpi_abort period     rank 1 has Options::period 3, the others 2
//   test_mpi_abort begin      rank 1 returns right after begin()
#include <cocod.hpp>
#include <cocod/comm/mpi.hpp>

#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "support.hpp"

namespace {
// Mode "thread": every std::thread fails to start, as when the process is out of threads. The
// MPI library's own threads (started from C code, not through libstdc++) start as usual.
bool refuse_std_threads = false;
}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) noexcept {
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const auto real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  Dl_info origin{};
  if (refuse_std_threads && dladdr(reinterpret_cast<void*>(start), &origin) && origin.dli_fname &&
      std::strstr(origin.dli_fname, "libstdc++"))
    return EAGAIN;
  return real(thread, attr, start, arg);
}

namespace {
void train(cocod::comm::Mpi comm) {
  using Model = cocod_test::LeastSquares<double>;
  Model model(200, 8, static_cast<std::uint64_t>(comm.rank()));
  cocod::Optimizer<Model, cocod::comm::Mpi> opt{comm, {.period = 4, .batch_size = 8}};
  opt.begin(model);
  for (std::size_t t = 0; t < 1000000; ++t) {
    if (comm.rank() == comm.size() - 1 && t == 5)
      throw std::runtime_error("injected failure at step 5 on rank " + std::to_string(comm.rank()));
    opt.step(model, opt.next_batch());
  }
  opt.finish(model);
}

// Rank 1 differs from the others as `mode` says; the others train 100 steps.
void differ(cocod::comm::Mpi comm, const std::string& mode) {
  using Model = cocod_test::LeastSquares<double>;
  Model model(200, 8, static_cast<std::uint64_t>(comm.rank()));
  const bool odd = comm.rank() == 1;
  cocod::Optimizer<Model, cocod::comm::Mpi> opt{comm, {.period = mode == "period" && odd ? std::size_t{3} : std::size_t{2},
                                                       .batch_size = 8}};
  if (mode == "begin") {
    opt.begin(model);
    if (odd) return;
    for (int t = 0; t < 100; ++t) opt.step(model, opt.next_batch());
    opt.finish(model);
    return;
  }
  opt.optimize(model, cocod::Steps{mode == "early" && odd ? std::size_t{10} : std::size_t{100}});
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "run";
  if (mode == "uncaught") {
    cocod::comm::Mpi comm(argc, argv);
    train(comm);
    return 0;
  }
  if (mode == "options")
    return cocod::comm::Mpi::run(argc, argv, train, {.poll_interval = std::chrono::microseconds(5)});
  if (mode == "status")
    return cocod::comm::Mpi::run(argc, argv, [](cocod::comm::Mpi comm) {
      if (comm.rank() < comm.size() - 1) return 0;
      std::fprintf(stderr, "test_mpi_abort: rank %d returns 3\n", comm.rank());
      return 3;
    });
  if (mode == "early" || mode == "period" || mode == "begin")
    return cocod::comm::Mpi::run(argc, argv, [&](cocod::comm::Mpi comm) { differ(comm, mode); });
  refuse_std_threads = mode == "thread";
  return cocod::comm::Mpi::run(argc, argv, train);
}
