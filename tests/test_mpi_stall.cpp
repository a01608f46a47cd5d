// A rank that stops making progress must not leave its peers waiting forever: with
// MpiOptions::stall_timeout = 2 s the others end with cocod::Aborted naming that rank, and
// Mpi::run ends the job. Run by ctest through cmake/expect_failure.cmake: mpiexec must exit
// non-zero, print the stall, and do so within the time limit.
//
//   test_mpi_stall DESIGN HOW KIND
//     DESIGN  polling_thread | blocking_thread | caller
//     HOW     sleep   the last rank sleeps 20 s before its collective of step 5
//             stop    the last rank stops itself (SIGSTOP) there
//             midway  (caller, posted) the last rank begins that collective, then sleeps 20 s
//                     without advancing it: the others wait in its data, or, when MPI had not
//                     yet sent its description (nothing progresses on this rank), for that
//     KIND    blocking (all_reduce) | posted (all_reduce_async, then wait)
#include <cocod/comm/mpi.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <span>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: test_mpi_stall polling_thread|blocking_thread|caller sleep|stop blocking|posted\n");
    return 2;
  }
  const std::string design = argv[1], how = argv[2], kind = argv[3];
  cocod::comm::MpiOptions options{.stall_timeout = std::chrono::seconds(2)};
  options.stall_suspected = [](const std::string& line) {  // half way: told before the error
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };
  options.progress = design == "caller"            ? cocod::comm::MpiProgress::caller
                     : design == "blocking_thread" ? cocod::comm::MpiProgress::blocking_thread
                                                   : cocod::comm::MpiProgress::polling_thread;
  return cocod::comm::Mpi::run(
      argc, argv,
      [&](cocod::comm::Mpi comm) {
        // midway: large enough that the rank-ordered sum needs the stalled rank's own work
        std::vector<double> v(how == "midway" ? 1000000 : 1000, 1.0);
        for (int step = 0; step < 1000; ++step) {
          if (step == 5 && comm.rank() == comm.size() - 1) {
            std::fprintf(stderr, "test_mpi_stall: rank %d stalls (%s)\n", comm.rank(), how.c_str());
            std::fflush(stderr);
            if (how == "stop") {
              std::raise(SIGSTOP);
            } else if (how == "midway") {
              // Begun: once the others posted theirs, progress() completes the exchange of
              // descriptions and posts the data stage, which nobody then advances here.
              auto request = comm.all_reduce_async(std::span<double>(v));
              std::this_thread::sleep_for(std::chrono::milliseconds(300));
              for (int i = 0; i < 10; ++i) comm.progress();
              std::this_thread::sleep_for(std::chrono::seconds(20));
              request.wait();
            } else {
              std::this_thread::sleep_for(std::chrono::seconds(20));
            }
          }
          if (kind == "posted") {
            auto request = comm.all_reduce_async(std::span<double>(v));
            request.wait();
          } else {
            comm.all_reduce(std::span<double>(v));
          }
          for (double& x : v) x = 1.0;
        }
      },
      options);
}
