// bf16 convolution weight gradients computed one batch slice per thread
// (core/kernels/conv_onednn_sliced_wgrad.h) against oneDNN's own one-thread primitive on
// the whole batch: the same bf16 products summed in another order, so within 1e-4 of the
// sum of |products|. Batches that do not split evenly and batches smaller than the thread
// count, with and without bias, plain and blocked activations, float32 and bfloat16.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/kernels/conv_onednn.h"
#include "core/kernels/half.h"
#include "core/layout.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace st::test {
namespace {

struct Grads {
  std::vector<float> dw, db, dx;
};

Tensor random_tensor(const Shape& s, uint64_t seed, bool positive = false) {
  Rng rng(seed);
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = rng.uniform() * 2.0f - 1.0f;
    t.f32()[i] = positive ? std::abs(v) : v;
  }
  return t;
}

// Backward of a 16 -> 32, 3x3, stride-1 convolution on 6x6 images with `threads` threads;
// with `bf16_io` x, y, dy and dx are bfloat16 tensors (the activations of a ResNet in bf16).
Grads backward(int64_t batch, bool bias, bool blocked, int threads, bool magnitudes,
               bool bf16_io = false) {
  const cpu::ConvGeometry g{.c = 16,
                            .h = 6,
                            .w = 6,
                            .kh = 3,
                            .kw = 3,
                            .sh = 1,
                            .sw = 1,
                            .ph = 1,
                            .pw = 1,
                            .oh = 6,
                            .ow = 6};
  Tensor x = random_tensor({batch, 16, 6, 6}, 1, magnitudes);
  Tensor w = random_tensor({32, 16, 3, 3}, 2, magnitudes);
  Tensor dy = random_tensor({batch, 32, 6, 6}, 3, magnitudes);
  const Layout layout = blocked ? Layout::Blocked16 : Layout::Plain;
  const DType type = bf16_io ? DType::BF16 : DType::F32;
  x = cpu::to_dtype(to_layout(x, layout), type);
  dy = cpu::to_dtype(to_layout(dy, layout), type);
  Tensor y = Tensor::empty({batch, 32, 6, 6}, type).with_layout(layout);
  Tensor dx = Tensor::empty({batch, 16, 6, 6}, type).with_layout(layout);
  Grads out;
  out.dw.assign(32 * 16 * 9, 0.0f);
  out.db.assign(32, 0.0f);
  const int saved = num_threads();
  set_num_threads(threads);
  set_cores_shared(true);  // the route a process sharing its cores takes
  {
    cpu::OneDnnConv conv(batch, 32, g, bias, /*bf16=*/true, {bf16_io, bf16_io});
    const cpu::ConvLayouts layouts{blocked, blocked};
    conv.forward(x.raw(), w.f32(), bias ? out.db.data() : nullptr, y.raw(), layouts);
    conv.backward(x.raw(), w.f32(), dy.raw(), out.dw.data(), bias ? out.db.data() : nullptr,
                  dx.raw(), layouts);
  }
  set_num_threads(saved);
  set_cores_shared(false);
  out.dx = to_plain(cpu::to_dtype(dx, DType::F32)).to_vector();
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& ref,
                  const std::vector<float>& mag, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    bad += std::abs(static_cast<double>(got[i]) - ref[i]) > 1e-4 * mag[i] + 1e-6;
  EXPECT_EQ(bad, 0) << what << ": elements beyond 1e-4 of the sum of |products|";
}

TEST(Bf16WeightGradSlices, MatchOneThreadOverTheWholeBatch) {
  if (!cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev absent)";
  for (const int64_t batch : {5, 2, 8})
    for (const bool bias : {false, true})
      for (const bool blocked : {false, true})
        for (const int threads : {2, 3}) {
          const std::string what = "batch " + std::to_string(batch) + (bias ? " bias" : "") +
                                   (blocked ? " blocked" : "") + " threads " +
                                   std::to_string(threads);
          const Grads ref = backward(batch, bias, blocked, 1, false);
          const Grads mag = backward(batch, bias, blocked, 1, true);
          const Grads got = backward(batch, bias, blocked, threads, false);
          expect_close(got.dw, ref.dw, mag.dw, what + " dw");
          if (bias) expect_close(got.db, ref.db, mag.db, what + " db");
          expect_close(got.dx, ref.dx, mag.dx, what + " dx");
          // The weight gradient is not zero (a path that dropped it would pass above only
          // if the reference also did).
          double norm = 0;
          for (float v : got.dw) norm += std::abs(v);
          EXPECT_GT(norm, 1.0) << what;
        }
}

// bf16 activations: the slices read x and dy as bfloat16 tensors (the same bf16 values the
// fp32-fed route rounds them to) and write dx in bfloat16 (one more rounding, 2^-8).
TEST(Bf16WeightGradSlices, ReadBf16Activations) {
  if (!cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev absent)";
  for (const int64_t batch : {5, 2})
    for (const bool blocked : {false, true}) {
      const std::string what =
          "batch " + std::to_string(batch) + (blocked ? " blocked" : "") + " bf16 activations";
      const Grads ref = backward(batch, true, blocked, 1, false);
      const Grads mag = backward(batch, true, blocked, 1, true);
      const Grads got = backward(batch, true, blocked, 2, false, /*bf16_io=*/true);
      expect_close(got.dw, ref.dw, mag.dw, what + " dw");
      expect_close(got.db, ref.db, mag.db, what + " db");
      for (size_t i = 0; i < got.dx.size(); ++i)
        ASSERT_LE(std::abs(got.dx[i] - ref.dx[i]), std::abs(ref.dx[i]) / 256 + 1e-4 * mag.dx[i])
            << what << " dx element " << i;
    }
}

}  // namespace
}  // namespace st::test
