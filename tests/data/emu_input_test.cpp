// The input pipeline on the emulated device, under a GPU's rules: batches are copied on
// the uploader's own stream, the compute (main thread's current) stream is ordered after
// them by an event, and the host never reads device memory. Every stream task is delayed,
// so a batch read without that ordering would be read before its copy ran.
#include <gtest/gtest.h>

#include <cstring>

#include "core/emu/runtime.h"
#include "core/upload.h"
#include "data/device_prefetch.h"
#include "data/synthetic.h"

namespace st::test {
namespace {

class EmuInput : public ::testing::Test {
 protected:
  void SetUp() override { emu::set_task_delay_us(2000); }
  void TearDown() override { emu::set_task_delay_us(0); }
};

void expect_equal(const Tensor& host, const Tensor& device, const std::string& what) {
  ASSERT_TRUE(device.device().is_emu()) << what << " is on " << device.device().str();
  ASSERT_EQ(host.shape(), device.shape()) << what;
  ASSERT_EQ(host.dtype(), device.dtype()) << what;
  EXPECT_THROW(device.raw(), Error) << "the host read " << what << " on the device";
  const Tensor back = device.to(Device::cpu());  // on the compute stream
  ASSERT_EQ(std::memcmp(back.raw(), host.raw(), host.nbytes()), 0) << what;
}

// Copies begun before the earlier ones are consumed each arrive intact.
TEST_F(EmuInput, OverlappingCopiesKeepTheirOwnData) {
  const Device dev = Device::emu(0);
  InputUploader up(dev);
  std::vector<Tensor> hosts;
  std::vector<InputUploader::Pending> pending;
  for (int b = 0; b < 3; ++b) {
    Tensor h = Tensor::empty({1 << 16});
    for (int64_t i = 0; i < h.numel(); ++i) h.f32()[i] = static_cast<float>(b * 1000003 + i);
    hosts.push_back(h);
    pending.push_back(up.start({h}));
  }
  for (int b = 0; b < 3; ++b)
    expect_equal(hosts[b], up.finish(std::move(pending[b]))[0], "batch " + std::to_string(b));
}

// The image trainer's input: loader batches through the prefetcher equal the CPU loader's
// batches, over two epochs and a mid-epoch resume.
TEST_F(EmuInput, PrefetchedBatchesEqualTheHostBatches) {
  auto ds = std::make_shared<SyntheticDataset>(53, Shape({3, 8, 8}), 4, 3);
  DistributedSampler sampler(ds->size(), {.seed = 1});
  DataLoader workers(ds, sampler, {.batch_size = 8, .workers = 2, .seed = 5});
  DataLoader plain(ds, sampler, {.batch_size = 8, .workers = 0, .seed = 5});
  DevicePrefetcher input(workers, Device::emu(0));
  for (int64_t epoch : {0, 1})
    for (int64_t skip : {0, 2}) {
      input.start_epoch(epoch, skip);
      plain.start_epoch(epoch, skip);
      int64_t batches = 0;
      while (std::optional<Batch> got = input.next()) {
        std::optional<Batch> want = plain.next();
        ASSERT_TRUE(want.has_value());
        EXPECT_EQ(got->index, want->index);
        expect_equal(want->images, got->images, "images");
        expect_equal(want->labels, got->labels, "labels");
        ++batches;
      }
      EXPECT_FALSE(plain.next().has_value());
      EXPECT_EQ(batches, 7 - skip);
    }
}

}  // namespace
}  // namespace st::test
