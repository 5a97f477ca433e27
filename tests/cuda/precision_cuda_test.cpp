// Mixed precision on a CUDA device against the CPU: the 16-bit conversions bit for bit,
// the loss scaler's unscale and overflow check on a device gradient, and the dense
// exchange in 16 bits (--comm-dtype) on device buckets. Skipped without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "comm/local_communicator.h"
#include "comm/reducer.h"
#include "core/cuda/half.h"
#include "core/kernels/half.h"
#include "core/rng.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/gradcheck.h"
#include "train/loss_scaler.h"

namespace st::test {
namespace {

const Device kGpu = Device::cuda(0);

// Random values over many binades, with the cases rounding must get right.
std::vector<float> awkward_values() {
  Rng rng(31);
  std::vector<float> v = random_tensor({4000}, rng, 3.0f).to_vector();
  for (size_t i = 0; i < v.size(); i += 7) v[i] *= std::ldexp(1.0f, static_cast<int>(i % 60) - 30);
  const float inf = std::numeric_limits<float>::infinity();
  v.insert(v.end(), {0.0f, -0.0f, inf, -inf, 65504.0f, 65520.0f, 1e-8f, 6e-5f, 3.0e38f, 1.00390625f,
                     1.01171875f, -2.0009765625f});
  return v;
}

TEST(CudaHalf, ConversionsMatchTheCpuBitForBit) {
  ST_REQUIRE_CUDA_DEVICE();
  const std::vector<float> v = awkward_values();
  const int64_t n = static_cast<int64_t>(v.size());
  const Tensor x = Tensor::from_vector(v, {n});
  const Tensor xd = x.to(kGpu);
  for (Precision p : {Precision::BF16, Precision::F16}) {
    SCOPED_TRACE(precision_name(p));
    std::vector<uint16_t> want(v.size());
    cpu::pack_half(p, v.data(), 0.5f, want.data(), n);
    Tensor packed = Tensor::zeros({(n + 1) / 2}, DType::I32, kGpu);
    auto* bits = static_cast<uint16_t*>(packed.raw());
    cuda::pack_half(p, xd.f32(), 0.5f, bits, n);
    const Tensor got = packed.to(Device::cpu());
    const auto* g = static_cast<const uint16_t*>(got.raw());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[i], want[i]) << "value " << v[i];
    // Widening: set and accumulate, as the CPU adds.
    std::vector<float> acc(v.size(), 1.0f);
    cpu::add_half(p, want.data(), acc.data(), n);
    Tensor acc_d = Tensor::from_vector(std::vector<float>(v.size(), 1.0f), {n}).to(kGpu);
    cuda::add_half(p, bits, acc_d.f32(), n);
    Tensor set_d = Tensor::zeros({n}, DType::F32, kGpu);
    cuda::unpack_half(p, bits, set_d.f32(), n);
    const std::vector<float> a = acc_d.to_vector(), s = set_d.to_vector();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(a[i] == acc[i] || (std::isnan(a[i]) && std::isnan(acc[i]))) << v[i];
      const float w = acc[i] - 1.0f;
      ASSERT_TRUE(s[i] == w || std::isinf(w) || std::isnan(w)) << v[i];
    }
  }
}

TEST(CudaHalf, LossScalerUnscalesAndFindsAnOverflowOnTheDevice) {
  ST_REQUIRE_CUDA_DEVICE();
  LocalCommunicator local;
  LossScalerOptions o;
  o.init_scale = 1024.0;
  LossScaler cpu_scaler(o), gpu_scaler(o);
  Rng rng(32);
  Tensor g = random_tensor({1000}, rng, 100.0f);
  Tensor gd = g.to(kGpu);
  EXPECT_TRUE(cpu_scaler.unscale_and_check(g, local));
  EXPECT_TRUE(gpu_scaler.unscale_and_check(gd, local));
  EXPECT_EQ(gd.to_vector(), g.to_vector());
  std::vector<float> bad = g.to_vector();
  bad[517] = std::numeric_limits<float>::quiet_NaN();
  Tensor bd = Tensor::from_vector(bad, {1000}).to(kGpu);
  EXPECT_FALSE(gpu_scaler.unscale_and_check(bd, local));
  EXPECT_TRUE(gpu_scaler.last_skipped());
  EXPECT_EQ(gpu_scaler.scale(), 512.0f);
}

TEST(CudaHalf, SixteenBitDenseExchangeOnDeviceEqualsTheCpu) {
  ST_REQUIRE_CUDA_DEVICE();
  LocalCommunicator local;
  Rng rng(33);
  const Tensor g = random_tensor({1001}, rng);  // odd: the last word is half used
  for (Precision p : {Precision::BF16, Precision::F16}) {
    SCOPED_TRACE(precision_name(p));
    AllreduceHook hook(p);
    Bucket bucket;
    bucket.numel = g.numel();
    Tensor on_cpu = g.clone(), on_gpu = g.to(kGpu);
    hook.exchange(bucket, on_cpu, local, 0);
    hook.exchange(bucket, on_gpu, local, 0);
    EXPECT_EQ(on_gpu.to_vector(), on_cpu.to_vector());
  }
}

}  // namespace
}  // namespace st::test
