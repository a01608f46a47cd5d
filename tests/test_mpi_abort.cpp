// A rank that throws mid-training must end the whole job quickly, with its message visible.
// Run by ctest through cmake/expect_failure.cmake: mpiexec must exit non-zero, print the failing
// rank's message, and do so within the time limit.
//   test_mpi_abort run        the exception is caught by Mpi::run, which aborts the job
//   test_mpi_abort uncaught   the exception leaves main (std::terminate)
#include <cocod.hpp>
#include <cocod/comm/mpi.hpp>

#include <stdexcept>
#include <string>

#include "support.hpp"

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
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "run";
  if (mode == "uncaught") {
    cocod::comm::Mpi comm(argc, argv);
    train(comm);
    return 0;
  }
  return cocod::comm::Mpi::run(argc, argv, train);
}
