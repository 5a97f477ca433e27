// bfloat16 activations (--precision bf16, docs/PRECISION.md): the conversions, and each
// layer that takes them (ReLU, ShortcutPadA, the residual add, BatchNorm2d, Conv2d,
// SqueezeExcite's channel scale)
// against the same layer in float32 on the same bf16-rounded values, then a residual
// block end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/kernels/conv_onednn.h"
#include "core/kernels/half.h"
#include "core/layout.h"
#include "core/ops.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/pointwise.h"
#include "layers/precision.h"
#include "layers/squeeze_excite.h"
#include "models/blocks.h"
#include "models/shortcut_pad.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

// A float32 tensor holding values that bfloat16 represents exactly.
Tensor bf16_values(const Shape& shape, Rng& rng, float scale = 1.0f) {
  return cpu::to_dtype(cpu::to_dtype(random_tensor(shape, rng, scale), DType::BF16), DType::F32);
}

std::vector<float> floats(const Tensor& t) {
  return to_plain(cpu::to_dtype(t, DType::F32)).to_vector();
}

// Every |got - want| <= rel * |want| + abs_of_max * max |want|.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel,
                  double abs_of_max, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double top = 0;
  for (float v : want) top = std::max(top, static_cast<double>(std::abs(v)));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::abs(got[i] - want[i]), rel * std::abs(want[i]) + abs_of_max * top)
        << what << " element " << i << ": " << got[i] << " vs " << want[i];
}

constexpr double kBf16Ulp = 1.0 / 256;  // 2^-8: bfloat16's largest relative rounding error

TEST(Bf16Activations, ConversionRoundsToNearestEvenInEitherLayout) {
  Rng rng(3);
  const Tensor x = random_tensor({2, 32, 3, 5}, rng);
  const Tensor b = cpu::to_dtype(x, DType::BF16);
  ASSERT_EQ(b.dtype(), DType::BF16);
  EXPECT_EQ(b.nbytes(), x.nbytes() / 2);
  const float* xf = x.f32();
  const uint16_t* bits = b.bf16_in_layout();
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(bits[i], cpu::float_to_bf16(xf[i])) << i;
  // Blocking bfloat16 moves the same elements as blocking float32.
  const Tensor blocked = to_layout(b, Layout::Blocked16);
  EXPECT_EQ(blocked.dtype(), DType::BF16);
  EXPECT_EQ(to_plain(cpu::to_dtype(blocked, DType::F32)).to_vector(),
            to_plain(to_layout(cpu::to_dtype(b, DType::F32), Layout::Blocked16)).to_vector());
  EXPECT_TRUE(cpu::to_dtype(b, DType::BF16).shares_storage(b));  // no copy when already there
  EXPECT_THROW(cpu::to_dtype(Tensor::zeros({4}, DType::I32), DType::F32), Error);
  EXPECT_THROW(b.f32_in_layout(), Error);
}

TEST(Bf16Activations, AddRoundsTheSumOnce) {
  Rng rng(5);
  const Tensor a = bf16_values({2, 16, 3, 3}, rng), s = bf16_values({2, 16, 3, 3}, rng);
  Tensor sum = cpu::to_dtype(a, DType::BF16);
  add_inplace(sum, to_layout(cpu::to_dtype(s, DType::BF16), Layout::Blocked16));
  ASSERT_EQ(sum.dtype(), DType::BF16);
  const std::vector<float> got = floats(sum), av = a.to_vector(), sv = s.to_vector();
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], cpu::bf16_to_float(cpu::float_to_bf16(av[i] + sv[i]))) << i;
  // A float32 second operand is rounded to the first's type before the sum.
  Tensor mixed = cpu::to_dtype(a, DType::BF16);
  add_inplace(mixed, s);
  EXPECT_EQ(floats(mixed), got);
}

// forward and backward of `layer` on bfloat16 x and dy (blocked) against `ref` on the
// same values in float32: elementwise selections give the same values exactly.
template <class L>
void expect_exact_in_bf16(L& ref, L& layer, const Shape& in, const char* what) {
  Rng rng(7);
  const Tensor x = bf16_values(in, rng);
  const Tensor y = ref.forward(x);
  const Tensor dy = bf16_values(y.shape(), rng);
  const Tensor dx = ref.backward(dy);
  const Tensor yb = layer.forward(to_layout(cpu::to_dtype(x, DType::BF16), Layout::Blocked16));
  EXPECT_EQ(yb.dtype(), DType::BF16) << what;
  EXPECT_EQ(floats(yb), y.to_vector()) << what;
  const Tensor dxb = layer.backward(cpu::to_dtype(dy, DType::BF16));
  EXPECT_EQ(dxb.dtype(), DType::BF16) << what;
  EXPECT_EQ(floats(dxb), dx.to_vector()) << what;
}

TEST(Bf16Activations, ReluAndShortcutAreExact) {
  ReLU a, b;
  expect_exact_in_bf16(a, b, {3, 16, 5, 5}, "ReLU");
  ShortcutPadA c(16, 32, 2), d(16, 32, 2);
  expect_exact_in_bf16(c, d, {3, 16, 7, 7}, "ShortcutPadA 16->32, s2");
}

TEST(Bf16Activations, BatchNormComputesInFloat32AndRoundsItsOutputs) {
  const Shape shape{11, 32, 5, 3};
  for (bool training : {true, false}) {
    BatchNorm2d ref(32), bn(32);
    for (BatchNorm2d* l : {&ref, &bn}) {
      Rng init(11);
      l->weight().value.copy_from(random_tensor({32}, init));
      l->bias().value.copy_from(random_tensor({32}, init));
      l->set_training(training);
    }
    Rng data(13);
    const Tensor x = to_layout(bf16_values(shape, data, 3.0f), Layout::Blocked16);
    const Tensor dy = to_layout(bf16_values(shape, data), Layout::Blocked16);
    const Tensor y = ref.forward(x), dx = ref.backward(dy);
    const Tensor yb = bn.forward(cpu::to_dtype(x, DType::BF16));
    const Tensor dxb = bn.backward(cpu::to_dtype(dy, DType::BF16));
    ASSERT_EQ(yb.dtype(), DType::BF16);
    ASSERT_EQ(dxb.dtype(), DType::BF16);
    EXPECT_EQ(yb.layout(), Layout::Blocked16);
    // The same float32 arithmetic on the same values; only the outputs are rounded.
    expect_close(floats(yb), floats(y), kBf16Ulp, 1e-6, "y");
    expect_close(floats(dxb), floats(dx), kBf16Ulp, 1e-6, "dx");
    expect_close(bn.weight().grad.to_vector(), ref.weight().grad.to_vector(), 0, 1e-6, "dgamma");
    expect_close(bn.bias().grad.to_vector(), ref.bias().grad.to_vector(), 0, 1e-6, "dbeta");
    expect_close(bn.running_var().to_vector(), ref.running_var().to_vector(), 0, 1e-7, "var");
  }
}

// SE-ResNet-18 under bf16 hands its SE blocks a convolution's bf16 output (blocked): the
// scale reads it and writes y = x * s in bf16, rounded once; the squeeze (which widens its
// input) and the parameter gradients see the same float32 values as with a float32 input.
TEST(Bf16Activations, SqueezeExciteScalesBf16AndRoundsOnce) {
  const Shape shape{3, 16, 4, 5};
  Rng init_a(31), init_b(31);
  SqueezeExcite ref(16, 4, init_a), se(16, 4, init_b);
  Rng data(33);
  const Tensor x = bf16_values(shape, data, 2.0f), dy = bf16_values(shape, data);
  const Tensor y = ref.forward(x), dx = ref.backward(dy);
  const Tensor yb = se.forward(to_layout(cpu::to_dtype(x, DType::BF16), Layout::Blocked16));
  ASSERT_EQ(yb.dtype(), DType::BF16);
  const std::vector<float> yf = y.to_vector(), ybf = floats(yb);
  for (size_t i = 0; i < yf.size(); ++i)
    ASSERT_EQ(ybf[i], cpu::bf16_to_float(cpu::float_to_bf16(yf[i]))) << "y element " << i;
  const Tensor dxb = se.backward(cpu::to_dtype(dy, DType::BF16));
  ASSERT_EQ(dxb.dtype(), DType::BF16);
  // dx = dy * s + the squeeze's gradient: each term rounded to bf16, then their sum, so
  // the bound is an ulp of the element and two of the largest term.
  expect_close(floats(dxb), floats(dx), kBf16Ulp, 2 * kBf16Ulp, "dx");
  const std::vector<Param*> want = collect_params(ref), got = collect_params(se);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i]->grad.to_vector(), want[i]->grad.to_vector()) << want[i]->name;
}

struct ConvRun {
  Tensor y, dx;
  std::vector<float> dw;
};

// A bf16 convolution 16 -> 32 on x and dy holding bfloat16 values, given to it as
// bfloat16 tensors (`bf16_io`: y and dx come back bfloat16) or as float32 ones.
ConvRun run_bf16_conv(bool bf16_io, int stride) {
  Rng init(21);
  Conv2d conv(16, 32, 3, stride, 1, false, init);
  conv.set_precision(Precision::BF16);
  conv.set_blocked_output(bf16_io);
  Rng data(23);
  Tensor x = to_layout(bf16_values({4, 16, 9, 9}, data), Layout::Blocked16);
  if (bf16_io) x = cpu::to_dtype(x, DType::BF16);
  const Tensor y = conv.forward(x);
  Tensor dy = bf16_values(Shape{4, 32, y.dim(2), y.dim(3)}, data);
  if (bf16_io) dy = cpu::to_dtype(dy, DType::BF16);
  const Tensor dx = conv.backward(dy);
  return {y, dx, conv.weight().grad.to_vector()};
}

TEST(Bf16Activations, ConvolutionReadsAndWritesBf16) {
  if (!cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN: no bf16 activations";
  for (int stride : {1, 2}) {
    const ConvRun f = run_bf16_conv(false, stride), b = run_bf16_conv(true, stride);
    EXPECT_EQ(f.y.dtype(), DType::F32);
    EXPECT_EQ(b.y.dtype(), DType::BF16) << "stride " << stride;
    EXPECT_EQ(b.dx.dtype(), DType::BF16) << "stride " << stride;
    EXPECT_EQ(b.dx.layout(), Layout::Blocked16);
    // The same bf16 products accumulated in float32; the bf16 results are rounded once
    // (plus the accumulation order of another kernel variant).
    expect_close(floats(b.y), floats(f.y), kBf16Ulp, 1e-4, "y");
    expect_close(floats(b.dx), floats(f.dx), kBf16Ulp, 1e-4, "dx");
    expect_close(b.dw, f.dw, 1e-5, 1e-5, "dw");
  }
}

// A residual block's output, input gradient and parameter gradients in `p`; with
// `native` off its convolutions hand over float32 activations (bf16 operands only).
struct BlockRun {
  std::vector<float> y, dx, grads;
  DType y_type, dx_type;
};

BlockRun run_block(Precision p, bool native) {
  Rng rng(31);
  LayerPtr block =
      basic_block(16, 32, 2, std::make_unique<ShortcutPadA>(16, 32, 2), "shortcut", rng);
  set_model_precision(*block, p);
  if (!native)
    block->visit_layers([](Layer& l) {
      if (auto* c = dynamic_cast<Conv2d*>(&l)) c->set_blocked_output(false);
    });
  Rng data(37);
  Tensor x = to_layout(bf16_values({32, 16, 8, 8}, data), Layout::Blocked16);
  if (p == Precision::BF16 && native) x = cpu::to_dtype(x, DType::BF16);
  const Tensor y = block->forward(x);
  const Tensor dx = block->backward(random_tensor(y.shape(), data));
  BlockRun r{floats(y), floats(dx), {}, y.dtype(), dx.dtype()};
  block->visit_params("", [&](const std::string&, Param& prm) {
    const std::vector<float> g = prm.grad.to_vector();
    r.grads.insert(r.grads.end(), g.begin(), g.end());
  });
  return r;
}

// Largest |a - b| over the largest |b|.
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, static_cast<double>(std::abs(a[i] - b[i])));
    ref = std::max(ref, static_cast<double>(std::abs(b[i])));
  }
  return err / ref;
}

TEST(Bf16Activations, AResidualBlockKeepsBf16AndLosesNoMoreThanBf16Operands) {
  if (!cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN: no bf16 activations";
  const BlockRun f = run_block(Precision::F32, true);
  const BlockRun operands = run_block(Precision::BF16, false);
  const BlockRun b = run_block(Precision::BF16, true);
  EXPECT_EQ(f.y_type, DType::F32);
  EXPECT_EQ(operands.y_type, DType::F32);
  EXPECT_EQ(b.y_type, DType::BF16);
  EXPECT_EQ(b.dx_type, DType::BF16);
  // BatchNorm's backward subtracts the gradient's mean and projection, so the rounding of
  // bf16 operands alone already moves dx by about a fifth of its largest value (32
  // images; PyTorch's autocast has the same); bf16 activations must not add much to it.
  // A misplaced element would be off by the values themselves.
  const double ey = rel_err(b.y, f.y), edx = rel_err(b.dx, f.dx), eg = rel_err(b.grads, f.grads);
  const double oy = rel_err(operands.y, f.y), odx = rel_err(operands.dx, f.dx),
               og = rel_err(operands.grads, f.grads);
  std::printf(
      "vs fp32 (y, dx, parameter gradients): bf16 operands %.4f %.4f %.4f, "
      "bf16 activations %.4f %.4f %.4f\n",
      oy, odx, og, ey, edx, eg);
  EXPECT_GT(ey, 1e-4) << "no bf16 rounding visible in the block's output";
  EXPECT_LE(ey, 0.03);
  EXPECT_LE(edx, 2 * odx + 0.01);
  EXPECT_LE(eg, 2 * og + 0.01);
}

}  // namespace
}  // namespace st::test
