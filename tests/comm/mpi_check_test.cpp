// ST_MPI_CHECK turns an MPI error code into an st::Error naming the call, MPI's own
// message and the source location.
#include "comm/mpi_check.h"

#include "comm/communicator.h"

#include <gtest/gtest.h>

namespace st::test {
namespace {

TEST(MpiCheck, ErrorNamesCallAndMpiMessage) {
  auto comm = make_communicator("mpi");  // MPI_Error_string needs MPI up (a singleton here)
  try {
    ST_MPI_CHECK(MPI_ERR_COUNT);
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("MPI_ERR_COUNT"), std::string::npos) << msg;
    EXPECT_NE(msg.find("mpi_check_test.cpp"), std::string::npos) << msg;
    EXPECT_NE(msg.find("count"), std::string::npos) << msg;  // MPI's text: "invalid count argument"
  }
  EXPECT_NO_THROW(ST_MPI_CHECK(MPI_SUCCESS));
}

}  // namespace
}  // namespace st::test
