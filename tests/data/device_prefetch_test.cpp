// The device prefetcher on the CPU is the loader itself (the CPU path copies nothing and
// keeps its order, epochs and mid-epoch skips); page-locked memory needs a GPU.
#include "data/device_prefetch.h"

#include <gtest/gtest.h>

#include "data/synthetic.h"

namespace st::test {
namespace {

std::vector<Batch> drain(DevicePrefetcher& input, int64_t epoch, int64_t skip) {
  input.start_epoch(epoch, skip);
  std::vector<Batch> out;
  while (std::optional<Batch> b = input.next()) out.push_back(std::move(*b));
  EXPECT_FALSE(input.next().has_value());  // stays at the end
  return out;
}

TEST(DevicePrefetcher, OnTheCpuItIsTheLoader) {
  auto ds = std::make_shared<SyntheticDataset>(45, Shape({1, 6, 6}), 3, 9);
  DistributedSampler sampler(ds->size(), {.seed = 2});
  DataLoader a(ds, sampler, {.batch_size = 10, .workers = 2, .seed = 4});
  DataLoader b(ds, sampler, {.batch_size = 10, .workers = 0, .seed = 4});
  DevicePrefetcher input(a, Device::cpu());
  EXPECT_TRUE(input.device().is_cpu());
  for (int64_t epoch : {0, 1}) {
    for (int64_t skip : {0, 3}) {
      const std::vector<Batch> got = drain(input, epoch, skip);
      b.start_epoch(epoch, skip);
      ASSERT_EQ(static_cast<int64_t>(got.size()), 5 - skip);
      for (const Batch& g : got) {
        std::optional<Batch> want = b.next();
        ASSERT_TRUE(want.has_value());
        EXPECT_EQ(g.epoch, epoch);
        EXPECT_EQ(g.index, want->index);
        EXPECT_TRUE(g.images.device().is_cpu());
        EXPECT_FALSE(g.images.pinned());  // pin_memory is off: ordinary host memory
        EXPECT_EQ(g.images.to_vector(), want->images.to_vector());
        for (int64_t k = 0; k < g.labels.numel(); ++k)
          EXPECT_EQ(g.labels.data<int32_t>()[k], want->labels.data<int32_t>()[k]);
      }
    }
  }
}

TEST(PinnedMemory, WithoutADeviceIsAnErrorNotASilentFallback) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device exists (tests/cuda covers it)";
  EXPECT_THROW(Tensor::empty_pinned({16}), Error);
}

}  // namespace
}  // namespace st::test
