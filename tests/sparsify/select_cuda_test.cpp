// The CUB selection kernels against the CPU kernels they mirror (ties included); skips
// without a device, fails under SPARSETRAIN_REQUIRE_GPU=1.
#include "sparsify/kernels/select_cuda.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "core/tensor.h"
#include "sparsify/kernels/select_cpu.h"
#include "tests/cuda/cuda_test_util.h"

namespace st::test {
namespace {

std::vector<float> data(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = std::round(rng.normal() * std::abs(rng.normal()) * 64.0f) / 64.0f;
  return x;  // rounded: many ties
}

std::vector<int32_t> to_host(const Tensor& t, int64_t count) {
  const Tensor h = t.to(Device::cpu());
  return std::vector<int32_t>(h.data<int32_t>(), h.data<int32_t>() + count);
}

TEST(SparsifyCuda, TopkMatchesCpu) {
  ST_REQUIRE_CUDA_DEVICE();
  for (int64_t n : {1, 1000, 300000}) {
    const std::vector<float> x = data(n, 1);
    const Tensor dx = Tensor::from_vector(x, {n}).to(Device::cuda(0));
    for (int64_t k : {int64_t{1}, n / 100 + 1, n}) {
      std::vector<int32_t> cpu;
      const float tau_cpu = select::topk_abs(x.data(), n, k, cpu);
      Tensor out = Tensor::empty({k}, DType::I32, Device::cuda(0));
      const float tau = select::topk_abs_cuda(dx.f32(), n, k, out.data<int32_t>());
      EXPECT_EQ(to_host(out, k), cpu) << "n=" << n << " k=" << k;
      if (k < n) {
        EXPECT_EQ(tau, tau_cpu);
      }
    }
  }
}

TEST(SparsifyCuda, ThresholdAndCountMatchCpu) {
  ST_REQUIRE_CUDA_DEVICE();
  const int64_t n = 250000;
  const std::vector<float> x = data(n, 2);
  const Tensor dx = Tensor::from_vector(x, {n}).to(Device::cuda(0));
  for (float tau : {0.0f, 0.5f, 1.0f, 3.0f, 1e9f})
    for (bool strict : {false, true}) {
      std::vector<int32_t> cpu;
      select::abs_threshold(x.data(), 0, n, tau, strict, cpu);
      Tensor out = Tensor::empty({n}, DType::I32, Device::cuda(0));
      const int64_t c = select::abs_threshold_cuda(dx.f32(), n, tau, strict, out.data<int32_t>());
      EXPECT_EQ(to_host(out, c), cpu) << "tau=" << tau << " strict=" << strict;
      EXPECT_EQ(select::count_abs_cuda(dx.f32(), n, tau, strict),
                select::count_abs(x.data(), 0, n, tau, strict));
    }
}

}  // namespace
}  // namespace st::test
