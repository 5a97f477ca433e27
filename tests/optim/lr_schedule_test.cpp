// LR schedules: known values, composition with warm-up, and the --schedule parser.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "optim/lr_schedule.h"

namespace st::test {
namespace {

TEST(LrSchedule, Constant) {
  const LrSchedule s = LrSchedule::constant(0.3f);
  EXPECT_FLOAT_EQ(s.lr(0, 0, 10), 0.3f);
  EXPECT_FLOAT_EQ(s.lr(99, 9, 10), 0.3f);
}

TEST(LrSchedule, MultiStep) {
  // torch MultiStepLR(milestones=[2, 4], gamma=0.1) stepped once per epoch.
  const LrSchedule s = LrSchedule::multistep(0.1f, {2, 4}, 0.1f);
  EXPECT_FLOAT_EQ(s.lr(0, 0, 5), 0.1f);
  EXPECT_FLOAT_EQ(s.lr(1, 4, 5), 0.1f);
  EXPECT_FLOAT_EQ(s.lr(2, 0, 5), 0.01f);
  EXPECT_FLOAT_EQ(s.lr(3, 3, 5), 0.01f);
  EXPECT_FLOAT_EQ(s.lr(4, 0, 5), 0.001f);
  EXPECT_FLOAT_EQ(s.lr(100, 0, 5), 0.001f);
}

TEST(LrSchedule, CosinePerEpoch) {
  // torch CosineAnnealingLR(T_max=10, eta_min=0): lr_e = (1 + cos(pi e / 10)) / 2.
  const LrSchedule s = LrSchedule::cosine(1.0f, 10, /*per_iteration=*/false);
  EXPECT_FLOAT_EQ(s.lr(0, 0, 4), 1.0f);
  EXPECT_FLOAT_EQ(s.lr(0, 3, 4), 1.0f);
  EXPECT_NEAR(s.lr(2, 1, 4), 0.9045085f, 1e-6);
  EXPECT_NEAR(s.lr(5, 0, 4), 0.5f, 1e-6);
  EXPECT_NEAR(s.lr(10, 0, 4), 0.0f, 1e-7);
  EXPECT_NEAR(s.lr(12, 0, 4), 0.0f, 1e-7);  // past the end stays at the minimum
}

TEST(LrSchedule, CosinePerIteration) {
  const LrSchedule s = LrSchedule::cosine(1.0f, 10);
  EXPECT_NEAR(s.lr(2, 2, 4), 0.8535534f, 1e-6);  // t = 2.5 epochs: (1 + cos(pi/4)) / 2
  EXPECT_NEAR(s.lr(9, 3, 4), 0.5f * (1.0f + std::cos(3.14159265f * 9.75f / 10.0f)), 1e-6);
  const LrSchedule floor = LrSchedule::cosine(1.0f, 10, true, 0.1f);
  EXPECT_NEAR(floor.lr(5, 0, 4), 0.55f, 1e-6);
}

TEST(LrSchedule, WarmupDefaultStart) {
  // 2 warm-up epochs of 5 iterations: lr_k = 0.4 * (k + 1) / 10 for k < 10.
  const LrSchedule s = LrSchedule::constant(0.4f).with_warmup(2.0);
  EXPECT_NEAR(s.lr(0, 0, 5), 0.04f, 1e-7);
  EXPECT_NEAR(s.lr(0, 4, 5), 0.2f, 1e-7);
  EXPECT_NEAR(s.lr(1, 2, 5), 0.32f, 1e-7);
  EXPECT_NEAR(s.lr(1, 4, 5), 0.4f, 1e-7);
  EXPECT_FLOAT_EQ(s.lr(2, 0, 5), 0.4f);
}

TEST(LrSchedule, WarmupGivenStart) {
  const LrSchedule s = LrSchedule::constant(0.4f).with_warmup(2.0, 0.1f);
  EXPECT_NEAR(s.lr(0, 0, 5), 0.1f, 1e-7);
  EXPECT_NEAR(s.lr(0, 3, 5), 0.2f, 1e-7);  // 0.1 + 0.3 * 3/9
  EXPECT_NEAR(s.lr(1, 4, 5), 0.4f, 1e-7);
}

TEST(LrSchedule, FractionalWarmup) {
  // Half an epoch of 8 iterations = 4 warm-up iterations.
  const LrSchedule s = LrSchedule::constant(1.0f).with_warmup(0.5, 0.0f);
  EXPECT_NEAR(s.lr(0, 0, 8), 0.0f, 1e-7);
  EXPECT_NEAR(s.lr(0, 1, 8), 1.0f / 3.0f, 1e-7);
  EXPECT_NEAR(s.lr(0, 3, 8), 1.0f, 1e-7);
  EXPECT_FLOAT_EQ(s.lr(0, 4, 8), 1.0f);
}

TEST(LrSchedule, WarmupThenMultiStep) {
  // Goyal et al. 2017: 5 warm-up epochs, then /10 at epochs 30, 60, 80 (absolute).
  const LrSchedule s = LrSchedule::multistep(3.2f, {30, 60, 80}).with_warmup(5.0);
  EXPECT_NEAR(s.lr(0, 0, 100), 3.2f / 500.0f, 1e-7);
  EXPECT_FLOAT_EQ(s.lr(5, 0, 100), 3.2f);
  EXPECT_FLOAT_EQ(s.lr(29, 99, 100), 3.2f);
  EXPECT_NEAR(s.lr(30, 0, 100), 0.32f, 1e-6);
  EXPECT_NEAR(s.lr(85, 0, 100), 0.0032f, 1e-7);
}

TEST(LrSchedule, WarmupThenCosine) {
  // The cosine spans the 10 epochs after a 2-epoch warm-up.
  const LrSchedule s = LrSchedule::cosine(1.0f, 12, false).with_warmup(2.0);
  EXPECT_NEAR(s.lr(1, 0, 1), 1.0f, 1e-7);  // last warm-up iteration reaches base
  EXPECT_FLOAT_EQ(s.lr(2, 0, 1), 1.0f);
  EXPECT_NEAR(s.lr(7, 0, 1), 0.5f, 1e-6);
  EXPECT_NEAR(s.lr(12, 0, 1), 0.0f, 1e-7);
}

TEST(LrSchedule, PureFunctionOfPosition) {
  const LrSchedule s = LrSchedule::cosine(0.1f, 30).with_warmup(1.5);
  const float later = s.lr(20, 3, 7);
  const float early = s.lr(0, 2, 7);
  EXPECT_EQ(s.lr(20, 3, 7), later);
  EXPECT_EQ(s.lr(0, 2, 7), early);
}

TEST(LrSchedule, BadPositionThrows) {
  const LrSchedule s = LrSchedule::constant(0.1f);
  EXPECT_THROW(s.lr(0, 5, 5), Error);
  EXPECT_THROW(s.lr(0, 0, 0), Error);
  EXPECT_THROW(s.lr(-1, 0, 5), Error);
}

TEST(LrScheduleParse, Specs) {
  LrSchedule m = parse_lr_schedule("multistep", 0.1f, 160);
  EXPECT_EQ(m.decay, LrDecay::MultiStep);
  EXPECT_EQ(m.milestones, std::vector<int64_t>({80, 120}));
  EXPECT_EQ(parse_lr_schedule("multistep", 0.1f, 1).milestones, std::vector<int64_t>());
  EXPECT_EQ(parse_lr_schedule("multistep", 0.1f, 2).milestones, std::vector<int64_t>({1}));
  LrSchedule g = parse_lr_schedule("multistep:30,60:0.2", 0.1f, 90, 5.0);
  EXPECT_EQ(g.milestones, std::vector<int64_t>({30, 60}));
  EXPECT_FLOAT_EQ(g.gamma, 0.2f);
  EXPECT_DOUBLE_EQ(g.warmup_epochs, 5.0);
  EXPECT_NEAR(g.lr(60, 0, 10), 0.1f * 0.2f * 0.2f, 1e-7);
  LrSchedule c = parse_lr_schedule("cosine", 0.1f, 200);
  EXPECT_EQ(c.decay, LrDecay::Cosine);
  EXPECT_EQ(c.total_epochs, 200);
  EXPECT_EQ(parse_lr_schedule("constant", 0.1f, 10).decay, LrDecay::Constant);
}

TEST(LrScheduleParse, BadSpecsNameTheFlag) {
  for (const char* bad : {"", "step", "multistep:a,b", "multistep:30,20", "multistep:3:x",
                          "cosine:5", "multistep:1:2:3"}) {
    try {
      parse_lr_schedule(bad, 0.1f, 100);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--schedule"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_lr_schedule("cosine", 0.1f, 5, 5.0), Error);  // nothing after warm-up
}

}  // namespace
}  // namespace st::test
