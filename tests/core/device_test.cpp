// "--device cuda" on a multi-GPU node: each process takes the GPU of its node-local rank;
// more processes on a node than GPUs is one clear error (tested with injected counts, as
// this machine has no GPU).
#include <gtest/gtest.h>

#include "core/device.h"
#include "core/error.h"

namespace st::test {
namespace {

TEST(LocalGpu, FourRanksOnFourGpusTakeZeroToThree) {
  for (int r = 0; r < 4; ++r) EXPECT_EQ(local_gpu({r, r, 4}, 4), r);
}

TEST(LocalGpu, TwoNodesOfTwoRanksEachUseTheirNodesGpus) {
  // Ranks 2 and 3 are the second node's local ranks 0 and 1.
  EXPECT_EQ(local_gpu({2, 0, 2}, 2), 0);
  EXPECT_EQ(local_gpu({3, 1, 2}, 2), 1);
}

TEST(LocalGpu, MoreRanksThanGpusNamesTheRankAndCounts) {
  try {
    local_gpu({3, 3, 4}, 2);
    FAIL() << "4 ranks on 2 GPUs must be refused";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 3 is one of 4 processes on its node, which has 2 GPU(s)"),
              std::string::npos)
        << msg;
  }
  EXPECT_THROW(local_gpu({0, 0, 1}, 0), Error);
}

// SLURM's --gpus-per-task=1 shows every task one GPU (CUDA_VISIBLE_DEVICES): each of the
// node's four ranks takes "its" device 0 instead of being refused.
TEST(LocalGpu, OneVisibleGpuPerTaskIsTaken) {
  for (int r = 0; r < 4; ++r) EXPECT_EQ(local_gpu({r, r, 4}, 1, true), 0);
  // Without the launcher's restriction one GPU for four ranks is still an error.
  EXPECT_THROW(local_gpu({1, 1, 4}, 1, false), Error);
  // Two visible GPUs for four tasks is ambiguous either way.
  EXPECT_THROW(local_gpu({3, 3, 4}, 2, true), Error);
}

TEST(LocalGpu, MalformedDeviceIndexIsAnError) {
  EXPECT_THROW(parse_device("cuda:x"), Error);
  EXPECT_THROW(parse_device("cuda:"), Error);
  EXPECT_TRUE(parse_device("cpu", {1, 1, 2}).is_cpu());
}

}  // namespace
}  // namespace st::test
