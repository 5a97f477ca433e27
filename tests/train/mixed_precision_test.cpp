// The bf16 speed notice of a CPU --precision bf16 run: the decision on injected probe
// times (shown when bf16 is measurably slower, silent otherwise), the probe itself, and
// the constructor printing at most that one line.
#include "train/mixed_precision.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/kernels/conv_onednn.h"
#include "core/rng.h"
#include "models/registry.h"

namespace st::test {
namespace {

TEST(Bf16Notice, ShownWhenBf16IsSlower) {
  const std::string note = bf16_speed_notice({/*bf16_ms=*/2.8, /*fp32_ms=*/2.0});
  EXPECT_EQ(note.rfind("sparsetrain: note: bf16 convolutions run 1.4x slower than fp32", 0), 0u)
      << note;
  EXPECT_NE(note.find("--precision fp32 is faster here"), std::string::npos) << note;
  EXPECT_EQ(note.find('\n'), std::string::npos) << "one line";
}

TEST(Bf16Notice, SilentWhenBf16IsFasterOrTied) {
  EXPECT_EQ(bf16_speed_notice({1.0, 2.0}), "");  // bf16 twice as fast (AMX)
  EXPECT_EQ(bf16_speed_notice({2.1, 2.0}), "");  // within the 10% margin
  EXPECT_EQ(bf16_speed_notice({0.0, 0.0}), "");  // not measured (no oneDNN)
  EXPECT_NE(bf16_speed_notice({2.3, 2.0}), "");  // just past it
}

TEST(Bf16Notice, ProbeMeasuresBothPrecisions) {
  if (!cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN";
  const ConvProbe p = probe_bf16_convolution();
  EXPECT_GT(p.bf16_ms, 0.0);
  EXPECT_GT(p.fp32_ms, 0.0);
  EXPECT_LT(std::max(p.bf16_ms, p.fp32_ms), 1e4);
  std::printf("bf16 probe: bf16 %.3f ms, fp32 %.3f ms (ratio %.2f)\n", p.bf16_ms, p.fp32_ms,
              p.bf16_ms / p.fp32_ms);
}

// A bf16 CPU run prints nothing or exactly the notice; --quiet, another rank or fp32
// print nothing.
TEST(Bf16Notice, ConstructorPrintsAtMostTheNotice) {
  Rng rng(0);
  LayerPtr model = make_model("resnet20", 10, 3, rng, 32);
  TrainConfig c;
  c.precision = "bf16";
  testing::internal::CaptureStderr();
  MixedPrecision loud(c, *model);
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(out.empty() || (out.rfind("sparsetrain: note: bf16 convolutions run", 0) == 0 &&
                              std::count(out.begin(), out.end(), '\n') == 1))
      << out;
  c.quiet = true;
  testing::internal::CaptureStderr();
  MixedPrecision quiet(c, *model);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  c.quiet = false;
  testing::internal::CaptureStderr();
  MixedPrecision other_rank(c, *model, /*announce=*/false);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  c.precision = "fp32";
  testing::internal::CaptureStderr();
  MixedPrecision fp32(c, *model);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace st::test
