// Under mpirun: ranks started with different flags are refused before any work, in one
// line naming the flag, the rank and rank 0; the LSTM flags are part of the check.
#include <gtest/gtest.h>

#include <memory>

#include "comm/communicator.h"
#include "core/error.h"
#include "tests/comm/mpi_test_run.h"
#include "train/config_check.h"

namespace st::test {
namespace {

// The refusal on this rank ("" when it passes).
std::string refusal(const TrainConfig& c) {
  try {
    check_same_config_on_all_ranks(c, world());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FlagAgreement, SameFlagsPass) {
  TrainConfig c;
  c.arch = "lstm";
  EXPECT_EQ(refusal(c), "");
}

TEST(FlagAgreement, LstmHiddenSizeThatDiffersIsRefused) {
  Communicator& comm = world();
  ASSERT_GE(comm.size(), 2) << "run under mpirun with 2 or more ranks";
  TrainConfig c;
  c.arch = "lstm";
  c.lm.hidden = comm.rank() == 0 ? 200 : 650;
  const std::string e = refusal(c);
  if (comm.rank() == 0) {
    EXPECT_EQ(e, "");
    return;
  }
  const std::string expected = "rank " + std::to_string(comm.rank()) +
                               " was started with --hidden '650', which differs from rank 0's";
  EXPECT_EQ(e.rfind(expected, 0), 0u) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(FlagAgreement, LstmLayerCountOnTheLastRankIsRefused) {
  Communicator& comm = world();
  ASSERT_GE(comm.size(), 2);
  TrainConfig c;
  c.arch = "lstm";
  const bool last = comm.rank() == comm.size() - 1;
  c.lm.layers = last ? 3 : 2;
  const std::string e = refusal(c);
  if (!last) {
    EXPECT_EQ(e, "");
    return;
  }
  EXPECT_NE(e.find("rank " + std::to_string(comm.rank()) + " was started with --layers '3'"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("rank 0's"), std::string::npos) << e;
}

}  // namespace
}  // namespace st::test
