// GoogleTest main for tests that run under mpirun: MPI comes up once for the whole
// binary.
#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "tests/comm/mpi_test_run.h"

namespace st::test {
namespace {
Communicator* g_world = nullptr;
}
Communicator& world() {
  return *g_world;
}
}  // namespace st::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = st::make_communicator("auto");
  st::test::g_world = comm.get();
  return st::test::run_all_tests_on_every_rank(*comm);
}
