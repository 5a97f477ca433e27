// Mixed precision on one process: the 16-bit conversions (known values), bf16 and fp16
// Conv2d/Linear against fp32 within the formats' rounding, and the dynamic loss scaler's
// rule (PyTorch GradScaler's) with its checkpoint state.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>

#include "comm/communicator.h"
#include "core/kernels/half.h"
#include "layers/conv2d.h"
#include "layers/linear.h"
#include "tests/gradcheck.h"
#include "train/loss_scaler.h"

namespace st::test {
namespace {

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(cpu::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(cpu::float_to_bf16(-2.0f), 0xc000);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even neighbour (1).
  EXPECT_EQ(cpu::bf16_to_float(cpu::float_to_bf16(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(cpu::bf16_to_float(cpu::float_to_bf16(1.0f + 0x1p-7f + 0x1p-8f)), 1.0f + 0x1p-6f);
  EXPECT_EQ(cpu::bf16_to_float(cpu::float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
  EXPECT_TRUE(std::isinf(cpu::bf16_to_float(cpu::float_to_bf16(3.4e38f))));
  EXPECT_TRUE(std::isnan(cpu::bf16_to_float(cpu::float_to_bf16(std::nanf("")))));
}

TEST(Half, Fp16RangeAndRounding) {
  EXPECT_EQ(cpu::float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(cpu::f16_to_float(cpu::float_to_f16(65504.0f)), 65504.0f);  // largest finite
  EXPECT_TRUE(std::isinf(cpu::f16_to_float(cpu::float_to_f16(65520.0f))));
  EXPECT_EQ(cpu::f16_to_float(cpu::float_to_f16(1.0f + 0x1p-11f)), 1.0f);  // tie to even
  EXPECT_EQ(cpu::f16_to_float(cpu::float_to_f16(0x1p-24f)), 0x1p-24f);     // smallest subnormal
  EXPECT_EQ(cpu::f16_to_float(cpu::float_to_f16(0x1p-26f)), 0.0f);
  // The vector path (8 at a time) and the scalar tail agree.
  std::vector<float> v(19), r(19);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * static_cast<float>(i) * 7919.0f;
  cpu::round_to(Precision::F16, v.data(), r.data(), 19);
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(r[i], cpu::f16_to_float(cpu::float_to_f16(v[i]))) << i;
}

TEST(Half, ParseNamesTheFlag) {
  EXPECT_EQ(parse_precision("bf16", "--precision"), Precision::BF16);
  try {
    parse_precision("fp8", "--comm-dtype");
    FAIL() << "fp8 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--comm-dtype 'fp8'"), std::string::npos) << e.what();
  }
}

struct ConvResult {
  std::vector<float> y, dx, dw, db;
};

Tensor abs_of(const Tensor& t) {
  Tensor a = t.clone();
  for (int64_t i = 0; i < a.numel(); ++i) a.f32()[i] = std::abs(a.f32()[i]);
  return a;
}

// A 16 -> 32 convolution, 3x3, stride 1, on 8x8 images, batch 4, with the given weight,
// bias, input and output gradient.
ConvResult run_conv(Precision p, CpuConvAlgo algo, const Tensor& w, const Tensor& b,
                    const Tensor& x, const Tensor& dy, std::string* impl = nullptr) {
  Rng rng(1);
  Conv2d conv(16, 32, 3, 1, 1, true, rng);
  conv.weight().value.copy_from(w);
  conv.bias()->value.copy_from(b);
  conv.set_cpu_algo(algo);
  conv.set_precision(p);
  Tensor y = conv.forward(x);
  Tensor dx = conv.backward(dy);
  if (impl) *impl = conv.onednn_impl();
  return {y.to_vector(), dx.to_vector(), conv.weight().grad.to_vector(),
          conv.bias()->grad.to_vector()};
}

struct ConvCase {
  Tensor w, b, x, dy;
  ConvCase() {
    Rng data(3);
    w = random_tensor({32, 16, 3, 3}, data);
    b = random_tensor({32}, data);
    x = random_tensor({4, 16, 8, 8}, data);
    dy = random_tensor({4, 32, 8, 8}, data);
  }
  // |x| * |w| in each of y, dx, dw (and sum |dy| for db): the scale of a rounding error.
  ConvResult magnitudes() const {
    return run_conv(Precision::F32, CpuConvAlgo::Auto, abs_of(w), Tensor::zeros({32}), abs_of(x),
                    abs_of(dy));
  }
};

// Each operand rounds with relative error at most u = 2^-8 (bf16's 8-bit significand), so
// a product of two is off by at most 2u + u^2, and a sum of products by that times the
// sum of |products|; fp32 accumulation adds at most 1e-4 of it here. Stated tolerance:
// |bf16 - fp32| <= (2^-7 + 1e-4) * (sum of |operand products|), element by element.
void expect_within(const std::vector<float>& got, const std::vector<float>& ref,
                   const std::vector<float>& mag, double rel, const char* what, bool must_differ) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - ref[i]);
    ASSERT_LE(diff, rel * mag[i] + 1e-6) << what << " element " << i;
    max_diff = std::max(max_diff, diff);
  }
  // A bf16 path that silently ran in fp32 would agree to fp32 noise.
  if (must_differ) {
    EXPECT_GT(max_diff, 1e-3) << what << ": no bf16 rounding visible";
  }
}

TEST(MixedPrecision, Bf16ConvolutionWithinRoundingOfFp32) {
  const ConvCase c;
  const ConvResult ref = run_conv(Precision::F32, CpuConvAlgo::Auto, c.w, c.b, c.x, c.dy);
  const ConvResult mag = c.magnitudes();
  std::string impl;
  const ConvResult got = run_conv(Precision::BF16, CpuConvAlgo::Auto, c.w, c.b, c.x, c.dy, &impl);
  const double tol = 0x1p-7 + 1e-4;
  expect_within(got.y, ref.y, mag.y, tol, "forward", true);
  expect_within(got.dx, ref.dx, mag.dx, tol, "input gradient", true);
  expect_within(got.dw, ref.dw, mag.dw, tol, "weight gradient", true);
  // Bias gradient: a sum of rounded dy, one rounding each (u = 2^-8).
  expect_within(got.db, ref.db, mag.db, 0x1p-8 + 1e-4, "bias gradient", false);
  if (cpu::onednn_built()) std::printf("oneDNN bf16 forward: %s\n", impl.c_str());
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string flags((std::istreambuf_iterator<char>(cpuinfo)), {});
  if (cpu::onednn_built() && flags.find("avx512_bf16") != std::string::npos) {
    EXPECT_NE(impl.find("bf16"), std::string::npos) << "oneDNN picked " << impl;
  }
}

// oneDNN's bf16 kernels and the fp32 reference on bf16-rounded operands compute the same
// products; only the fp32 summation order differs.
TEST(MixedPrecision, Bf16OneDnnMatchesRoundedReference) {
  if (!cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev absent)";
  const ConvCase c;
  const ConvResult mag = c.magnitudes();
  const ConvResult dnn = run_conv(Precision::BF16, CpuConvAlgo::OneDnn, c.w, c.b, c.x, c.dy);
  const ConvResult ref = run_conv(Precision::BF16, CpuConvAlgo::Im2col, c.w, c.b, c.x, c.dy);
  expect_within(dnn.y, ref.y, mag.y, 1e-4, "forward", false);
  expect_within(dnn.dx, ref.dx, mag.dx, 1e-4, "input gradient", false);
  expect_within(dnn.dw, ref.dw, mag.dw, 1e-4, "weight gradient", false);
  expect_within(dnn.db, ref.db, mag.db, 1e-4, "bias gradient", false);
}

TEST(MixedPrecision, Fp16ConvolutionWithinRoundingOfFp32) {
  const ConvCase c;
  const ConvResult ref = run_conv(Precision::F32, CpuConvAlgo::Auto, c.w, c.b, c.x, c.dy);
  const ConvResult mag = c.magnitudes();
  const ConvResult got = run_conv(Precision::F16, CpuConvAlgo::Auto, c.w, c.b, c.x, c.dy);
  // Operands and the result round (u = 2^-11 each): 3u + u^2 of the magnitudes, plus the
  // result's own rounding, which |result| <= magnitudes also bounds.
  const double tol = 4 * 0x1p-11 + 1e-4;
  expect_within(got.y, ref.y, mag.y, tol, "forward", false);
  expect_within(got.dx, ref.dx, mag.dx, tol, "input gradient", false);
  expect_within(got.dw, ref.dw, mag.dw, tol, "weight gradient", false);
}

// fp16 holds at most 65504: a product beyond it is inf, as on a GPU, which is what the
// loss scaler detects. bf16 has fp32's range.
TEST(MixedPrecision, Fp16LinearOverflowsToInf) {
  Rng rng(1);
  Linear fc(2, 1, false, rng);
  fc.weight().value.copy_from(Tensor::from_vector({300.0f, 0.5f}, {1, 2}));
  const Tensor x = Tensor::from_vector({300.0f, 1.0f}, {1, 2});  // 90000.5
  fc.set_precision(Precision::F16);
  EXPECT_TRUE(std::isinf(fc.forward(x).f32()[0]));
  fc.set_precision(Precision::BF16);
  EXPECT_EQ(fc.forward(x).f32()[0], 90000.5f);  // 300, 0.5 and 1 are exact in bf16
  // And a backward whose scaled gradient overflows: dx = dy * w = 1000 * 300.
  fc.set_precision(Precision::F16);
  fc.forward(x);
  const Tensor dx = fc.backward(Tensor::from_vector({1000.0f}, {1, 1}));
  EXPECT_TRUE(std::isinf(dx.f32()[0]));
  EXPECT_EQ(dx.f32()[1], 500.0f);
}

TEST(LossScaler, PyTorchRuleKnownValues) {
  LossScalerOptions o;
  o.interval = 3;
  LossScaler s(o);
  EXPECT_EQ(s.scale(), 65536.0f);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 65536.0f);
  s.update(true);  // third clean step in a row: doubles
  EXPECT_EQ(s.scale(), 131072.0f);
  EXPECT_EQ(s.clean_steps(), 0);
  s.update(true);
  s.update(false);  // overflow: halves and restarts the count
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.clean_steps(), 0);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_TRUE(s.last_skipped());
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 65536.0f);  // the count restarted at the overflow
  EXPECT_FALSE(s.last_skipped());
}

TEST(LossScaler, OverflowSkipsTheStepAndLowersTheScale) {
  auto comm = make_communicator("local");
  LossScaler s;
  Tensor g = Tensor::from_vector({65536.0f, -131072.0f, 6553.6f}, {3});
  EXPECT_TRUE(s.unscale_and_check(g, *comm));
  EXPECT_EQ(g.f32()[0], 1.0f);
  EXPECT_EQ(g.f32()[1], -2.0f);
  EXPECT_FLOAT_EQ(g.f32()[2], 0.1f);
  EXPECT_EQ(s.scale(), 65536.0f);
  Tensor bad = Tensor::from_vector({1.0f, std::numeric_limits<float>::infinity(), 2.0f}, {3});
  EXPECT_FALSE(s.unscale_and_check(bad, *comm));
  EXPECT_EQ(s.scale(), 32768.0f);
  Tensor nan = Tensor::from_vector({std::nanf(""), 0.0f}, {2});
  EXPECT_FALSE(s.unscale_and_check(nan, *comm));
  EXPECT_EQ(s.scale(), 16384.0f);
  EXPECT_EQ(s.skipped_steps(), 2);
}

TEST(LossScaler, StateRoundTripsThroughCheckpointMetadata) {
  LossScaler s;
  s.update(false);
  s.update(true);
  s.update(true);
  std::map<std::string, std::string> meta;
  s.save(meta);
  LossScaler r;
  r.restore(meta, "ckpt");
  EXPECT_EQ(r.scale(), 32768.0f);
  EXPECT_EQ(r.clean_steps(), 2);
  EXPECT_EQ(r.skipped_steps(), 1);
  LossScaler fresh;
  fresh.restore({}, "ckpt");  // an fp32 run's checkpoint: the initial state
  EXPECT_EQ(fresh.scale(), 65536.0f);
  meta["loss_scale"] = "-1";
  EXPECT_THROW(r.restore(meta, "ckpt"), Error);
}

}  // namespace
}  // namespace st::test
