// GPU-vs-CPU comparison for every layer with a CUDA implementation: CudaVsCpu.<case> for
// every row of the layer case table (tests/layers/layer_cases.h) with a CUDA tolerance.
// Two identically seeded copies, one moved to the GPU, run forward and backward on the
// same random data; outputs, input gradients, parameter gradients (pre-filled, so
// accumulation is checked) and buffers (BatchNorm running statistics) must agree, and
// every parameter must announce gradient-ready exactly once. Two steps or more, so
// per-call state (dropout streams, running averages, cached cuDNN descriptors) is
// exercised too. Each test skips with the reason where no GPU exists.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "layers/conv2d.h"
#include "layers/linear.h"
#include "layers/softmax_cross_entropy.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/gradcheck.h"
#include "tests/layers/layer_cases.h"

namespace st::test {
namespace {

const Device kGpu = Device::cuda(0);

// cuDNN may pick TF32 tensor-core kernels on Ampere and newer, whose rounding would
// move ReLU kinks and max-pool winners relative to the FP32 CPU reference; this
// binary asks the libraries for strict FP32 before any CUDA call.
const bool kStrictFp32 = [] { return setenv("NVIDIA_TF32_OVERRIDE", "0", 0) == 0; }();

void compare_case_on_gpu(const LayerCase& c) {
  ST_REQUIRE_CUDA_DEVICE();
  EXPECT_TRUE(kStrictFp32);
  compare_with_cpu(c, kGpu, *c.cuda);
}

[[maybe_unused]] const bool kRegistered = [] {
  register_case_tests(
      "CudaVsCpu", [](const LayerCase& c) { return c.cuda.has_value(); }, compare_case_on_gpu);
  return true;
}();

TEST(CudaVsCpu, Conv2dNewBatchSizeRebuildsDescriptors) {
  ST_REQUIRE_CUDA_DEVICE();
  Rng rng(11);
  Conv2d cpu(2, 3, 3, 1, 1, true, rng);
  Rng rng2(11);
  Conv2d gpu(2, 3, 3, 1, 1, true, rng2);
  gpu.to(kGpu);
  for (int64_t n : {4, 1, 3}) {
    Tensor x = random_tensor({n, 2, 5, 5}, rng);
    Tensor y_cpu = cpu.forward(x);
    expect_close(y_cpu, gpu.forward(x.to(kGpu)), kGpu, kConvTol, "batch " + std::to_string(n));
  }
}

TEST(CudaVsCpu, SoftmaxCrossEntropy) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_softmax_with_cpu(kGpu, Tol{1e-5, 1e-5}, Tol{1e-6, 1e-4});
}

TEST(CudaErrors, SoftmaxBadLabelNamesRow) {
  ST_REQUIRE_CUDA_DEVICE();
  SoftmaxCrossEntropy loss;
  Tensor logits = Tensor::zeros({3, 4}, DType::F32, kGpu);
  Tensor labels = Tensor::from_vector_i32({0, 7, 1}, {3}).to(kGpu);
  try {
    loss.forward(logits, labels);
    FAIL() << "expected a label error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 7 at row 1"), std::string::npos) << e.what();
  }
}

TEST(CudaErrors, ShapeAndDeviceErrorsNameTheLayer) {
  ST_REQUIRE_CUDA_DEVICE();
  Rng rng(14);
  Linear fc(4, 2, true, rng);
  // Parameters still on the CPU, input on the GPU.
  try {
    fc.forward(Tensor::zeros({2, 4}, DType::F32, kGpu));
    FAIL() << "expected a device error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Linear(4->2)"), std::string::npos) << e.what();
  }
  fc.to(kGpu);
  try {
    fc.forward(Tensor::zeros({2, 5}, DType::F32, kGpu));
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 5]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace st::test
