// main() for tests on emulated devices under mpirun: every rank on its node-local
// emulated device, host tensors over MPI and device tensors over the emulated collective
// (MPI at MPI_THREAD_MULTIPLE).
#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "core/device.h"
#include "tests/comm/mpi_test_run.h"

namespace st::test {
Communicator* g_emu_world = nullptr;
Communicator& world() {
  return *g_emu_world;
}
}  // namespace st::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = st::make_communicator("auto", "emu");
  st::set_process_device(st::parse_device("emu", comm->placement()));
  st::test::g_emu_world = comm.get();
  return st::test::run_all_tests_on_every_rank(*comm);
}
