// The loop's step accounting: steps per epoch with accumulation, the short last step,
// the run's end from a resumed position and under --max-iters, and the checkpoint plan.
#include "train/run_progress.h"

#include <gtest/gtest.h>

namespace st {
namespace {

TEST(RunProgress, AnEpochOfMicroBatchesEndsWithAShorterStep) {
  TrainConfig c;
  c.accum_steps = 4;
  c.epochs = 3;
  RunProgress p(c, 10);  // 10 micro-batches: steps of 4, 4 and 2
  EXPECT_EQ(p.steps_per_epoch(), 3);
  EXPECT_EQ(p.group_size(0), 4);
  EXPECT_EQ(p.group_size(2), 2);
  EXPECT_LE(p.group_size(3), 0) << "past the epoch's last step";
  p.start_at({});
  EXPECT_EQ(p.total_steps(), 9);
  EXPECT_EQ(p.result.steps, 0);
}

TEST(RunProgress, TheEndCountsFromTheResumedPositionAndStopsAtMaxIters) {
  TrainConfig c;
  c.epochs = 4;
  RunProgress p(c, 8);
  // A checkpoint of a run with 5 steps per epoch (another number of ranks), mid-epoch 1.
  p.start_at({1, 3, 8});
  EXPECT_EQ(p.result.steps, 8);
  EXPECT_EQ(p.total_steps(), 8 + (8 - 3) + 2 * 8) << "the rest of epoch 1, then epochs 2, 3";
  c.max_iters = 10;
  p.start_at({1, 3, 8});
  EXPECT_EQ(p.total_steps(), 10);
  const CheckpointSchedule::Plan plan = p.checkpoint_plan(true);
  EXPECT_EQ(plan.last_step, 10);
  EXPECT_EQ(plan.steps_per_epoch, 8);
  EXPECT_EQ(plan.micro_batches_per_epoch, 8);
  EXPECT_TRUE(plan.lagged);
}

}  // namespace
}  // namespace st
