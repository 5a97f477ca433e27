// bf16 convolution weight gradients computed one batch slice per thread
// (core/kernels/conv_onednn_sliced_wgrad.h) against oneDNN's own one-thread primitive on
// the whole batch: the same bf16 products summed in another order, so within 1e-4 of the
// sum of |products|. Batches that do not split evenly and batches smaller than the thread
// count, with and without bias, plain and blocked activations.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/kernels/conv_onednn.h"
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

// Backward of a 16 -> 32, 3x3, stride-1 convolution on 6x6 images with `threads` threads.
Grads backward(int64_t batch, bool bias, bool blocked, int threads, bool magnitudes) {
  const cpu::ConvGeometry g{16, 6, 6, 3, 3, 1, 1, 6, 6};
  Tensor x = random_tensor({batch, 16, 6, 6}, 1, magnitudes);
  Tensor w = random_tensor({32, 16, 3, 3}, 2, magnitudes);
  Tensor dy = random_tensor({batch, 32, 6, 6}, 3, magnitudes);
  const Layout layout = blocked ? Layout::Blocked16 : Layout::Plain;
  x = to_layout(x, layout);
  dy = to_layout(dy, layout);
  Tensor y = Tensor::empty({batch, 32, 6, 6}).with_layout(layout);
  Tensor dx = Tensor::empty({batch, 16, 6, 6}).with_layout(layout);
  Grads out;
  out.dw.assign(32 * 16 * 9, 0.0f);
  out.db.assign(32, 0.0f);
  const int saved = num_threads();
  set_num_threads(threads);
  set_cores_shared(true);  // the route a process sharing its cores takes
  {
    cpu::OneDnnConv conv(batch, 32, g, bias, /*bf16=*/true);
    const cpu::ConvLayouts layouts{blocked, blocked};
    conv.forward(x.f32_in_layout(), w.f32(), bias ? out.db.data() : nullptr, y.f32_in_layout(),
                 layouts);
    conv.backward(x.f32_in_layout(), w.f32(), dy.f32_in_layout(), out.dw.data(),
                  bias ? out.db.data() : nullptr, dx.f32_in_layout(), layouts);
  }
  set_num_threads(saved);
  set_cores_shared(false);
  out.dx = to_plain(dx).to_vector();
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

}  // namespace
}  // namespace st::test
