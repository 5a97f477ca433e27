// What every GoogleTest main under mpirun does once its communicator exists: only rank 0
// prints the test listing (failures print on every rank), and the job fails when any
// rank's tests failed.
#pragma once

#include <gtest/gtest.h>

#include "comm/communicator.h"

namespace st::test {

// The communicator the test binary's main() made (comm/mpi_main.cpp, or comm/emu_main.cpp
// where host tensors go over MPI and emulated-device tensors over the emulated collective).
Communicator& world();

inline int run_all_tests_on_every_rank(Communicator& comm) {
  if (comm.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  // Every rank must agree: a failure anywhere fails the job.
  const double failed = comm.allreduce_scalar(rc != 0 ? 1.0 : 0.0);
  return failed > 0 ? 1 : 0;
}

}  // namespace st::test
