// The back-off that replaces MPI's spinning wait, and the Open MPI defaults the CLI sets.
#include "comm/mpi_wait.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "comm/communicator.h"
#include "comm/mpi_env.h"

namespace st::test {
namespace {

using std::chrono::microseconds;

TEST(Backoff, SpinsThenYieldsThenSleepsDoublingUpToTheCap) {
  Backoff b;
  b.spins = 3;
  b.yields = 2;
  b.first_sleep = microseconds(1);
  b.max_sleep = microseconds(5);
  for (int n = 0; n < 5; ++n) EXPECT_EQ(b.pause_for(n), microseconds(0)) << n;
  EXPECT_EQ(b.pause_for(5), microseconds(1));
  EXPECT_EQ(b.pause_for(6), microseconds(2));
  EXPECT_EQ(b.pause_for(7), microseconds(4));
  EXPECT_EQ(b.pause_for(8), microseconds(5));
  EXPECT_EQ(b.pause_for(1000000), microseconds(5));  // no overflow far out
}

// The default never sleeps longer than the cap the header's bandwidth argument assumes.
TEST(Backoff, DefaultCapIsAtMost200Microseconds) {
  const Backoff b;
  EXPECT_LE(b.max_sleep, microseconds(200));
  EXPECT_EQ(b.pause_for(b.spins + b.yields + 60), b.max_sleep);
}

// The value of Open MPI's integer control variable `wanted` (-1 and a failure if absent).
int int_cvar(const std::string& wanted) {
  int num = 0;
  EXPECT_EQ(MPI_T_cvar_get_num(&num), MPI_SUCCESS);
  for (int i = 0; i < num; ++i) {
    char name[256], desc[1024];
    int name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
    MPI_Datatype type;
    MPI_T_enum enumtype;
    MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind,
                        &scope);
    if (name != wanted) continue;
    MPI_T_cvar_handle handle;
    int count = 0, value = 0;
    EXPECT_EQ(MPI_T_cvar_handle_alloc(i, nullptr, &handle, &count), MPI_SUCCESS);
    EXPECT_EQ(MPI_T_cvar_read(handle, &value), MPI_SUCCESS);
    MPI_T_cvar_handle_free(&handle);
    return value;
  }
  ADD_FAILURE() << "Open MPI has no control variable " << wanted;
  return -1;
}

// MPI starts once per process: ctest runs each TEST in its own (gtest_discover_tests).
bool mpi_already_used() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized || finalized;
}

TEST(MpiEnv, DefaultsReachOpenMpi) {
  if (mpi_already_used()) GTEST_SKIP() << "needs a process of its own (ctest runs it so)";
  ::unsetenv("OMPI_MCA_mpi_yield_when_idle");
  ::unsetenv("OMPI_MCA_btl_tcp_links");
  set_mpi_env_defaults();
  auto comm = make_communicator("mpi");
  int provided = 0;
  MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
  EXPECT_EQ(int_cvar("mpi_yield_when_idle"), 1);
  EXPECT_EQ(int_cvar("btl_tcp_links"), 2);
  MPI_T_finalize();
}

TEST(MpiEnv, UserSettingWins) {
  if (mpi_already_used()) GTEST_SKIP() << "needs a process of its own (ctest runs it so)";
  ::setenv("OMPI_MCA_mpi_yield_when_idle", "0", 1);
  ::setenv("OMPI_MCA_btl_tcp_links", "3", 1);
  set_mpi_env_defaults();
  EXPECT_STREQ(std::getenv("OMPI_MCA_mpi_yield_when_idle"), "0");
  auto comm = make_communicator("mpi");
  int provided = 0;
  MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
  EXPECT_EQ(int_cvar("mpi_yield_when_idle"), 0);
  EXPECT_EQ(int_cvar("btl_tcp_links"), 3);
  MPI_T_finalize();
}

TEST(MpiWait, CollectivesCompleteThroughTheBackoff) {
  if (mpi_already_used()) GTEST_SKIP() << "needs a process of its own (ctest runs it so)";
  auto comm = make_communicator("mpi");
  Tensor t = Tensor::from_vector({1.f, 2.f}, {2});
  comm->allreduce(t);  // one rank: unchanged
  EXPECT_EQ(t.f32()[1], 2.f);
  comm->barrier();
  MPI_Request req = MPI_REQUEST_NULL;
  ASSERT_EQ(MPI_Ibarrier(MPI_COMM_WORLD, &req), MPI_SUCCESS);
  wait_with_backoff(req, "MPI_Ibarrier");
  EXPECT_EQ(req, MPI_REQUEST_NULL);
}

}  // namespace
}  // namespace st::test
