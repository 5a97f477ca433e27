// The fixture of the GPU-vs-CPU tests of bulk::Ops (cuda_ops_test.cpp,
// cuda_ops_quant_test.cpp): one CpuOps and one CudaOps, the same host data in both, and
// random inputs with many ties. Skips without a device.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "sparsify/bulk/bulk_ops.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/bulk/cuda_ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace st::test {

using bulk::Buffer;
using bulk::Elem;
using part::Range;

inline std::vector<float> values(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = std::round(rng.normal() * std::abs(rng.normal()) * 64.0f) / 64.0f;
  return x;
}

// Positions in [0, domain), repeats included, in random order.
inline std::vector<int32_t> positions(int64_t m, int64_t domain, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(m));
  for (auto& v : p) v = static_cast<int32_t>(rng.below(static_cast<uint32_t>(domain)));
  return p;
}

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ST_REQUIRE_CUDA_DEVICE();
    gpu_ = std::make_unique<bulk::CudaOps>(Device::cuda(0));
  }

  // The same host data in a buffer of each implementation.
  template <typename T>
  void put(const std::vector<T>& h, Elem e, Buffer& c, Buffer& g) {
    cpu_.upload(h.data(), e, static_cast<int64_t>(h.size()), c);
    gpu_->upload(h.data(), e, static_cast<int64_t>(h.size()), g);
  }
  template <typename T>
  static std::vector<T> get(bulk::Ops& ops, const Buffer& b) {
    std::vector<T> h(static_cast<size_t>(b.size()));
    ops.download(b, 0, b.size(), h.data());
    return h;
  }
  std::vector<int32_t> ints_cpu(const Buffer& b) { return get<int32_t>(cpu_, b); }
  std::vector<int32_t> ints_gpu(const Buffer& b) { return get<int32_t>(*gpu_, b); }
  std::vector<float> floats_cpu(const Buffer& b) { return get<float>(cpu_, b); }
  std::vector<float> floats_gpu(const Buffer& b) { return get<float>(*gpu_, b); }

  bulk::CpuOps cpu_;
  std::unique_ptr<bulk::CudaOps> gpu_;  // every family, like cpu_
};

}  // namespace st::test
