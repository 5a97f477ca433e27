// The GPU input pipeline: page-locked batches, copies on the side stream that the
// compute stream waits for, and the prefetcher one batch ahead. Every copied batch must
// equal the host batch it came from. Skips without a device.
#include <gtest/gtest.h>

#include <cstring>

#include "core/host_allocator.h"
#include "core/upload.h"
#include "data/device_prefetch.h"
#include "data/synthetic.h"
#include "tests/cuda/cuda_test_util.h"

namespace st::test {
namespace {

const Device kGpu = Device::cuda(0);

void expect_equal(const Tensor& host, const Tensor& device, const std::string& what) {
  ASSERT_TRUE(device.device().is_cuda()) << what << " is on " << device.device().str();
  ASSERT_EQ(host.shape(), device.shape()) << what;
  ASSERT_EQ(host.dtype(), device.dtype()) << what;
  const Tensor back = device.to(Device::cpu());
  ASSERT_EQ(std::memcmp(back.raw(), host.raw(), host.nbytes()), 0) << what;
}

TEST(CudaInput, PinnedTensorsCopyOnTheSideStreamAndAreCached) {
  ST_REQUIRE_CUDA_DEVICE();
  Tensor images = Tensor::empty_pinned({64, 3, 32, 32});
  Tensor labels = Tensor::empty_pinned({64}, DType::I32);
  ASSERT_TRUE(images.pinned() && labels.pinned());
  for (int64_t i = 0; i < images.numel(); ++i)
    images.f32()[i] = 0.25f * static_cast<float>(i % 977);
  for (int64_t i = 0; i < labels.numel(); ++i)
    labels.data<int32_t>()[i] = static_cast<int32_t>(i * 7);
  {
    InputUploader up(kGpu);
    InputUploader::Pending p = up.start({images, labels});
    ASSERT_EQ(p.tensors.size(), 2u);
    const std::vector<Tensor> on_device = up.finish(std::move(p));
    // to(cpu) reads on the compute stream, after the event the compute stream waits on.
    expect_equal(images, on_device[0], "images");
    expect_equal(labels, on_device[1], "labels");
  }  // the uploader lets go of the host tensors (their copies are done)
  // A released page-locked block is kept and handed out again for the same size.
  const size_t bytes = images.nbytes();
  images = Tensor();
  const host::Stats cached = host::pinned_stats();
  EXPECT_GE(cached.cached, bytes);
  Tensor again = Tensor::empty_pinned({64, 3, 32, 32});
  EXPECT_EQ(host::pinned_stats().cached, cached.cached - bytes);
}

// A copy begun before another is finished: each batch still arrives intact, and work on
// the compute stream between them does not wait for the later copy.
TEST(CudaInput, OverlappingCopiesKeepTheirOwnData) {
  ST_REQUIRE_CUDA_DEVICE();
  InputUploader up(kGpu);
  std::vector<Tensor> hosts;
  std::vector<InputUploader::Pending> pending;
  for (int b = 0; b < 3; ++b) {
    Tensor h = Tensor::empty_pinned({1 << 20});
    for (int64_t i = 0; i < h.numel(); ++i) h.f32()[i] = static_cast<float>(b * 1000003 + i);
    hosts.push_back(h);
    pending.push_back(up.start({h}));
  }
  for (int b = 0; b < 3; ++b)
    expect_equal(hosts[b], up.finish(std::move(pending[b]))[0], "batch " + std::to_string(b));
}

// The image trainer's input: page-locked loader batches through the prefetcher equal the
// CPU loader's batches, over two epochs and a mid-epoch resume.
TEST(CudaInput, PrefetchedBatchesEqualTheHostBatches) {
  ST_REQUIRE_CUDA_DEVICE();
  auto ds = std::make_shared<SyntheticDataset>(53, Shape({3, 8, 8}), 4, 3);
  DistributedSampler sampler(ds->size(), {.seed = 1});
  DataLoader pinned(ds, sampler, {.batch_size = 8, .workers = 2, .seed = 5, .pin_memory = true});
  DataLoader plain(ds, sampler, {.batch_size = 8, .workers = 0, .seed = 5});
  DevicePrefetcher input(pinned, kGpu);
  for (int64_t epoch : {0, 1}) {
    for (int64_t skip : {0, 4}) {
      input.start_epoch(epoch, skip);
      plain.start_epoch(epoch, skip);
      int64_t n = 0;
      while (std::optional<Batch> g = input.next()) {
        std::optional<Batch> want = plain.next();
        ASSERT_TRUE(want.has_value());
        EXPECT_EQ(g->index, want->index);
        EXPECT_EQ(g->epoch, epoch);
        expect_equal(want->images, g->images, "images of batch " + std::to_string(g->index));
        expect_equal(want->labels, g->labels, "labels of batch " + std::to_string(g->index));
        ++n;
      }
      EXPECT_FALSE(plain.next().has_value());
      EXPECT_EQ(n, 7 - skip);
    }
  }
}

}  // namespace
}  // namespace st::test
