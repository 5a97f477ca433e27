// main() for tests on emulated devices under mpirun: every rank on its node-local
// emulated device, host tensors over MPI and device tensors over the emulated collective
// (MPI at MPI_THREAD_MULTIPLE), one verdict for all ranks.
#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "core/device.h"

namespace st::test {
Communicator* g_emu_world = nullptr;
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = st::make_communicator("auto", "emu");
  st::set_process_device(st::parse_device("emu", comm->placement()));
  st::test::g_emu_world = comm.get();
  if (comm->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  const double failed = comm->allreduce_scalar(rc != 0 ? 1.0 : 0.0);
  return failed > 0 ? 1 : 0;
}
