// oneDNN and the im2col + GEMM reference give the same convolution, forward and
// backward, on ResNet shapes (including the batch-chunked GEMM path).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include "core/parallel.h"
#include "layers/conv2d.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

struct Result {
  std::vector<float> y, dx, dw, db;
};

Result run(CpuConvAlgo algo, int cin, int cout, int k, int s, int p, const Shape& in) {
  Rng rng(42);
  Conv2d conv(cin, cout, k, s, p, true, rng);
  conv.set_cpu_algo(algo);
  Rng data(7);
  Tensor x = random_tensor(in, data);
  Tensor y = conv.forward(x);
  // Two backward passes with different output gradients: parameter gradients accumulate
  // (the layer contract), so a kernel that overwrote them would differ from the reference.
  conv.backward(random_tensor(y.shape(), data));
  conv.forward(x);
  Tensor dy = random_tensor(y.shape(), data);
  Tensor dx = conv.backward(dy);
  return {y.to_vector(), dx.to_vector(), conv.weight().grad.to_vector(),
          conv.bias()->grad.to_vector()};
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_err = std::max(max_err, static_cast<double>(std::abs(a[i] - b[i])));
    max_ref = std::max(max_ref, static_cast<double>(std::abs(b[i])));
  }
  EXPECT_LE(max_err, 1e-4 * std::max(1.0, max_ref)) << what;
}

class ConvAlgorithms : public ::testing::TestWithParam<std::tuple<int, int, int, int, int, int>> {};

TEST_P(ConvAlgorithms, OneDnnMatchesIm2col) {
  if (!cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev absent)";
  auto [cin, cout, k, s, p, hw] = GetParam();
  const Shape in{9, cin, hw, hw};  // odd batch: uneven per-thread and per-GEMM chunks
  Result ref = run(CpuConvAlgo::Im2col, cin, cout, k, s, p, in);
  Result dnn = run(CpuConvAlgo::OneDnn, cin, cout, k, s, p, in);
  expect_close(dnn.y, ref.y, "forward");
  expect_close(dnn.dx, ref.dx, "input gradient");
  expect_close(dnn.dw, ref.dw, "weight gradient");
  expect_close(dnn.db, ref.db, "bias gradient");
}

INSTANTIATE_TEST_SUITE_P(
    ResNetShapes, ConvAlgorithms,
    ::testing::Values(std::make_tuple(3, 16, 3, 1, 1, 32), std::make_tuple(16, 32, 3, 2, 1, 16),
                      std::make_tuple(32, 32, 3, 1, 1, 8), std::make_tuple(64, 128, 1, 2, 0, 8),
                      std::make_tuple(16, 64, 1, 1, 0, 8), std::make_tuple(3, 8, 7, 2, 3, 17),
                      // Winograd F(4x4, 3x3) in oneDNN: 32 channels at 16x16 (ResNet-20),
                      // 64 at 56x56 (ResNet-18/50's first stage)
                      std::make_tuple(32, 32, 3, 1, 1, 16), std::make_tuple(64, 64, 3, 1, 1, 56)));

// Winograd is chosen for 3x3 stride-1 maps with 32 or more channels where the CPU has
// oneDNN's kernel for it (AVX-512), not for 16 channels (slower there), not where the
// process shares its cores, and not under SPARSETRAIN_WINOGRAD=off
// (core/kernels/conv_onednn.cpp).
std::string impl_of(int channels, int side) {
  Rng rng(1);
  Conv2d conv(channels, channels, 3, 1, 1, true, rng);
  conv.forward(Tensor::zeros({1, channels, side, side}));
  return conv.onednn_impl();
}

TEST(ConvAlgorithmChoice, WinogradWhereItPays) {
  if (!cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev absent)";
  const auto npos = std::string::npos;
  EXPECT_EQ(impl_of(16, 32).find("wino"), npos) << impl_of(16, 32);
  set_cores_shared(true);
  EXPECT_EQ(impl_of(64, 28).find("wino"), npos) << impl_of(64, 28);
  set_cores_shared(false);
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string flags((std::istreambuf_iterator<char>(cpuinfo)), {});
  const char* setting = std::getenv("SPARSETRAIN_WINOGRAD");
  const bool off = setting != nullptr && std::string(setting) == "off";
  for (const auto& [c, side] : {std::pair{32, 16}, std::pair{64, 56}, std::pair{512, 7}}) {
    const std::string impl = impl_of(c, side);
    if (off) {
      EXPECT_EQ(impl.find("wino"), npos) << impl;
    } else if (flags.find("avx512f") != npos) {
      EXPECT_NE(impl.find("wino"), npos)
          << c << " channels, " << side << "x" << side << ": " << impl;
    }
  }
}

}  // namespace
}  // namespace st::test
