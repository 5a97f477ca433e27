// GoogleTest main for tests that run under mpirun: MPI comes up once for the whole
// binary, and only rank 0 prints the test listing (failures print on every rank).
#include <gtest/gtest.h>

#include "comm/communicator.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = st::make_communicator("auto");
  if (comm->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  // Every rank must agree: a failure anywhere fails the job.
  const double failed = comm->allreduce_scalar(rc != 0 ? 1.0 : 0.0);
  return failed > 0 ? 1 : 0;
}
