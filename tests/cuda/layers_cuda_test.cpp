// GPU-vs-CPU comparison for every layer with a CUDA implementation: two identically
// seeded copies, one moved to the GPU, run forward and backward on the same random data;
// outputs, input gradients, parameter gradients (pre-filled, so accumulation is checked)
// and buffers (BatchNorm running statistics) must agree, and every parameter must
// announce gradient-ready exactly once. Two steps, so per-call state (dropout streams,
// running averages, cached cuDNN descriptors) is exercised too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pooling.h"
#include "layers/relu.h"
#include "layers/sequential.h"
#include "layers/softmax_cross_entropy.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

const Device kGpu = Device::cuda(0);

struct Tol {
  double atol = 1e-5;
  double rtol = 1e-4;
};

void expect_close(const Tensor& cpu, const Tensor& gpu, const Tol& tol, const std::string& what) {
  ASSERT_EQ(cpu.shape(), gpu.shape()) << what;
  ASSERT_TRUE(gpu.device().is_cuda()) << what << " is on " << gpu.device().str();
  if (cpu.dtype() != DType::F32) {
    const Tensor g = gpu.to(Device::cpu());
    ASSERT_EQ(g.dtype(), cpu.dtype()) << what;
    if (cpu.dtype() == DType::I64) {
      for (int64_t i = 0; i < cpu.numel(); ++i)
        EXPECT_EQ(g.data<int64_t>()[i], cpu.data<int64_t>()[i]) << what << " element " << i;
    }
    return;
  }
  const std::vector<float> a = cpu.to_vector(), b = gpu.to_vector();
  int reported = 0;
  for (size_t i = 0; i < a.size() && reported < 5; ++i) {
    if (std::abs(a[i] - b[i]) > tol.atol + tol.rtol * std::abs(a[i])) {
      ADD_FAILURE() << what << " element " << i << " of " << cpu.shape() << ": cpu " << a[i]
                    << " gpu " << b[i];
      ++reported;
    }
  }
}

using Factory = std::function<LayerPtr()>;

void compare_layer(const Factory& make, const Shape& input, const Tol& tol = {},
                   bool training = true, int steps = 2) {
  LayerPtr cpu = make(), gpu = make();
  cpu->set_training(training);
  gpu->set_training(training);
  gpu->to(kGpu);
  const std::string name = cpu->describe();
  std::vector<Param*> cpu_params = collect_params(*cpu), gpu_params = collect_params(*gpu);
  std::vector<Buffer*> cpu_bufs = collect_buffers(*cpu), gpu_bufs = collect_buffers(*gpu);
  ASSERT_EQ(cpu_params.size(), gpu_params.size());
  Rng rng(42);
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    Tensor g0 = random_tensor(cpu_params[i]->grad.shape(), rng, 0.5f);
    cpu_params[i]->grad.copy_from(g0);
    gpu_params[i]->grad.copy_from(g0);  // host -> device
  }
  std::map<Param*, int> ready;
  for (Param* p : gpu_params) p->on_grad_ready = [&ready](Param& q) { ++ready[&q]; };

  for (int step = 0; step < steps; ++step) {
    const std::string at = name + " step " + std::to_string(step) + " ";
    Tensor x = random_tensor(input, rng);
    Tensor y_cpu = cpu->forward(x);
    Tensor y_gpu = gpu->forward(x.to(kGpu));
    expect_close(y_cpu, y_gpu, tol, at + "forward");
    Tensor dy = random_tensor(y_cpu.shape(), rng);
    Tensor dx_cpu = cpu->backward(dy);
    Tensor dx_gpu = gpu->backward(dy.to(kGpu));
    expect_close(dx_cpu, dx_gpu, tol, at + "input gradient");
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      expect_close(cpu_params[i]->grad, gpu_params[i]->grad, tol,
                   at + cpu_params[i]->name + " gradient");
      EXPECT_EQ(ready[gpu_params[i]], step + 1) << at << gpu_params[i]->name;
    }
    for (size_t i = 0; i < cpu_bufs.size(); ++i)
      expect_close(cpu_bufs[i]->value, gpu_bufs[i]->value, tol, at + cpu_bufs[i]->name);
  }
  for (Param* p : gpu_params) p->on_grad_ready = nullptr;
}

// cuDNN may pick TF32 tensor-core kernels on Ampere and newer, whose rounding would
// move ReLU kinks and max-pool winners relative to the FP32 CPU reference; this
// binary asks the libraries for strict FP32 before any CUDA call.
const bool kStrictFp32 = [] { return setenv("NVIDIA_TF32_OVERRIDE", "0", 0) == 0; }();
// Different summation orders in cuDNN's algorithms still leave FP32-level differences.
const Tol kConvTol{5e-3, 5e-3};
const Tol kBnTol{1e-4, 1e-3};

TEST(CudaVsCpu, ReLU) {
  ST_REQUIRE_CUDA_DEVICE();
  EXPECT_TRUE(kStrictFp32);
  compare_layer([] { return std::make_unique<ReLU>(); }, {4, 3, 9, 9}, Tol{0, 0});
}

TEST(CudaVsCpu, DropoutTrainingDropsSameElements) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer([] { return std::make_unique<Dropout>(0.3f, 99); }, {4, 1000}, Tol{0, 0});
}

TEST(CudaVsCpu, DropoutEvalIsIdentity) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer([] { return std::make_unique<Dropout>(0.5f, 5); }, {3, 17}, Tol{0, 0}, false);
}

TEST(CudaVsCpu, MaxPool2d3x3Stride2Pad1) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer([] { return std::make_unique<MaxPool2d>(3, 2, 1); }, {2, 3, 11, 11}, Tol{0, 0});
}

TEST(CudaVsCpu, MaxPool2d2x2Stride2) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer([] { return std::make_unique<MaxPool2d>(2, 2, 0); }, {2, 4, 8, 8}, Tol{0, 0});
}

TEST(CudaVsCpu, AvgPool2d3x3Stride2Pad1CountsPadding) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer([] { return std::make_unique<AvgPool2d>(3, 2, 1); }, {2, 3, 9, 9});
}

TEST(CudaVsCpu, AvgPool2d2x2Stride2) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer([] { return std::make_unique<AvgPool2d>(2, 2, 0); }, {2, 4, 8, 8});
}

TEST(CudaVsCpu, GlobalAvgPool2d) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer([] { return std::make_unique<GlobalAvgPool2d>(); }, {3, 5, 7, 7});
}

TEST(CudaVsCpu, LinearWithBias) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer(
      [] {
        Rng rng(3);
        return std::make_unique<Linear>(37, 19, true, rng);
      },
      {8, 37});
}

TEST(CudaVsCpu, LinearNoBias) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer(
      [] {
        Rng rng(4);
        return std::make_unique<Linear>(16, 5, false, rng);
      },
      {3, 16});
}

TEST(CudaVsCpu, BatchNorm2dTraining) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer(
      [] {
        auto bn = std::make_unique<BatchNorm2d>(6);
        Rng rng(5);
        bn->weight().value.copy_from(random_tensor({6}, rng));
        bn->bias().value.copy_from(random_tensor({6}, rng));
        return bn;
      },
      {4, 6, 5, 5}, kBnTol, true, 3);
}

TEST(CudaVsCpu, BatchNorm2dEval) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer(
      [] {
        auto bn = std::make_unique<BatchNorm2d>(4);
        Rng rng(6);
        bn->running_mean().copy_from(random_tensor({4}, rng));
        Tensor var = random_tensor({4}, rng, 0.5f);
        for (int i = 0; i < 4; ++i) var.f32()[i] += 1.0f;
        bn->running_var().copy_from(var);
        bn->weight().value.copy_from(random_tensor({4}, rng));
        return bn;
      },
      {3, 4, 6, 6}, kBnTol, false);
}

TEST(CudaVsCpu, Conv2d3x3Stride1PadBias) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer(
      [] {
        Rng rng(7);
        return std::make_unique<Conv2d>(3, 8, 3, 1, 1, true, rng);
      },
      {2, 3, 10, 10}, kConvTol);
}

TEST(CudaVsCpu, Conv2d3x3Stride2NoBias) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer(
      [] {
        Rng rng(8);
        return std::make_unique<Conv2d>(4, 6, 3, 2, 1, false, rng);
      },
      {3, 4, 9, 9}, kConvTol);
}

TEST(CudaVsCpu, Conv2d1x1Pointwise) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer(
      [] {
        Rng rng(9);
        return std::make_unique<Conv2d>(8, 4, 1, 1, 0, true, rng);
      },
      {2, 8, 6, 6}, kConvTol);
}

TEST(CudaVsCpu, Conv2d7x7Stride2Pad3) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_layer(
      [] {
        Rng rng(10);
        return std::make_unique<Conv2d>(3, 4, 7, 2, 3, false, rng);
      },
      {2, 3, 16, 16}, kConvTol);
}

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
    expect_close(y_cpu, gpu.forward(x.to(kGpu)), kConvTol, "batch " + std::to_string(n));
  }
}

TEST(CudaVsCpu, SmallNetworkTrainingStep) {
  ST_REQUIRE_CUDA_DEVICE();
  auto make = [] {
    Rng rng(12);
    auto net = std::make_unique<Sequential>();
    net->add("conv", std::make_unique<Conv2d>(3, 8, 3, 1, 1, false, rng));
    net->add("bn", std::make_unique<BatchNorm2d>(8));
    net->add("relu", std::make_unique<ReLU>());
    net->add("pool", std::make_unique<MaxPool2d>(2, 2, 0));
    net->add("gap", std::make_unique<GlobalAvgPool2d>());
    net->add("flat", std::make_unique<Flatten>());
    net->add("fc", std::make_unique<Linear>(8, 10, true, rng));
    return net;
  };
  compare_layer(make, {4, 3, 8, 8}, kConvTol);
}

// --precision bf16|fp16: both devices round the operands alike (core/kernels/half_math.h
// on both for bf16; IEEE round-to-nearest-even instructions for fp16) and accumulate in
// fp32; cuDNN also stores its output in 16 bits before widening, the CPU's oneDNN bf16
// kernel does not, so the bound is a few 16-bit ulps of the largest values.
const Tol kHalfTol[] = {{0, 0}, {3e-2, 2e-2}, {1e-2, 1e-2}};  // by Precision: -, bf16, fp16

TEST(CudaVsCpu, Conv2dInMixedPrecisionMatchesTheCpu) {
  ST_REQUIRE_CUDA_DEVICE();
  for (Precision p : {Precision::BF16, Precision::F16}) {
    SCOPED_TRACE(precision_name(p));
    compare_layer(
        [p] {
          Rng rng(21);
          auto conv = std::make_unique<Conv2d>(4, 8, 3, 1, 1, true, rng);
          conv->set_precision(p);
          return conv;
        },
        {2, 4, 9, 9}, kHalfTol[static_cast<int>(p)]);
  }
}

TEST(CudaVsCpu, LinearInMixedPrecisionMatchesTheCpu) {
  ST_REQUIRE_CUDA_DEVICE();
  for (Precision p : {Precision::BF16, Precision::F16}) {
    SCOPED_TRACE(precision_name(p));
    compare_layer(
        [p] {
          Rng rng(22);
          auto fc = std::make_unique<Linear>(33, 12, true, rng);
          fc->set_precision(p);
          return fc;
        },
        {6, 33}, kHalfTol[static_cast<int>(p)]);
  }
}

TEST(CudaVsCpu, SoftmaxCrossEntropy) {
  ST_REQUIRE_CUDA_DEVICE();
  Rng rng(13);
  for (int64_t k : {3, 10, 100}) {
    Tensor logits = random_tensor({9, k}, rng, 4.0f);
    std::vector<int32_t> y(9);
    for (int i = 0; i < 9; ++i) y[i] = static_cast<int32_t>(rng.below(static_cast<uint32_t>(k)));
    Tensor labels = Tensor::from_vector_i32(y, {9});
    SoftmaxCrossEntropy cpu, gpu;
    const float loss_cpu = cpu.forward(logits, labels);
    const float loss_gpu = gpu.forward(logits.to(kGpu), labels.to(kGpu));
    EXPECT_NEAR(loss_gpu, loss_cpu, 1e-5 + 1e-5 * std::abs(loss_cpu)) << k;
    EXPECT_EQ(gpu.correct(), cpu.correct()) << k;
    expect_close(cpu.backward(0.5f), gpu.backward(0.5f), Tol{1e-6, 1e-4},
                 "softmax gradient k=" + std::to_string(k));
  }
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
