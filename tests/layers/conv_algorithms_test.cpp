// oneDNN and the im2col + GEMM reference give the same convolution, forward and
// backward, on ResNet shapes (including the batch-chunked GEMM path).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

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
                      // ResNet-18/50's first stage: oneDNN runs Winograd F(4x4, 3x3) here
                      std::make_tuple(64, 64, 3, 1, 1, 56)));

// Winograd is chosen for the first-stage shape of the ImageNet ResNets (64 channels,
// 56x56, stride 1) where the CPU has oneDNN's kernel for it (AVX-512), and not for the
// small maps of the CIFAR ResNets, where it is slower (core/kernels/conv_onednn.cpp);
// SPARSETRAIN_WINOGRAD=off turns it off.
TEST(ConvAlgorithmChoice, WinogradOnlyOnWideMaps) {
  if (!cpu::onednn_built()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev absent)";
  Rng rng(1);
  Conv2d wide(64, 64, 3, 1, 1, true, rng), narrow(64, 64, 3, 1, 1, true, rng);
  wide.forward(Tensor::zeros({1, 64, 56, 56}));
  narrow.forward(Tensor::zeros({1, 64, 28, 28}));
  EXPECT_EQ(narrow.onednn_impl().find("wino"), std::string::npos) << narrow.onednn_impl();
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string flags((std::istreambuf_iterator<char>(cpuinfo)), {});
  const char* setting = std::getenv("SPARSETRAIN_WINOGRAD");
  const bool off = setting != nullptr && std::string(setting) == "off";
  if (off) {
    EXPECT_EQ(wide.onednn_impl().find("wino"), std::string::npos) << wide.onednn_impl();
  } else if (flags.find("avx512f") != std::string::npos) {
    EXPECT_NE(wide.onednn_impl().find("wino"), std::string::npos) << wide.onednn_impl();
  }
}

}  // namespace
}  // namespace st::test
