// The input pipeline on the emulated device, under a GPU's rules: batches are copied on
// the uploader's own stream, the compute (main thread's current) stream is ordered after
// them by an event, and the host never reads device memory. Every stream task is delayed,
// so a batch read without that ordering would be read before its copy ran.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "core/emu/memory.h"
#include "core/emu/runtime.h"
#include "core/emu/stream.h"
#include "core/upload.h"
#include "data/device_prefetch.h"
#include "data/synthetic.h"

namespace st::test {
namespace {

class EmuInput : public ::testing::Test {
 protected:
  void SetUp() override {
    set_process_device(Device::emu(0));  // page-locked memory comes from the emulation
    emu::set_task_delay_us(2000);
  }
  void TearDown() override {
    emu::set_task_delay_us(0);
    set_process_device(Device::cpu());
  }
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
  DataLoader workers(ds, sampler, {.batch_size = 8, .workers = 2, .seed = 5, .pin_memory = true});
  DataLoader plain(ds, sampler, {.batch_size = 8, .workers = 0, .seed = 5});
  DevicePrefetcher input(workers, Device::emu(0));
  const int64_t pageable_before = emu::pageable_async_copies();
  for (int64_t epoch : {0, 1})
    for (int64_t skip : {0, 2}) {
      input.start_epoch(epoch, skip);
      plain.start_epoch(epoch, skip);
      int64_t batches = 0;
      while (std::optional<Batch> got = input.next()) {
        std::optional<Batch> want = plain.next();
        ASSERT_TRUE(want.has_value());
        EXPECT_EQ(got->index, want->index);
        EXPECT_TRUE(got->images.device().is_emu());
        expect_equal(want->images, got->images, "images");
        expect_equal(want->labels, got->labels, "labels");
        ++batches;
      }
      EXPECT_FALSE(plain.next().has_value());
      EXPECT_EQ(batches, 7 - skip);
    }
  // Every batch was assembled in page-locked memory, so every copy could overlap compute.
  EXPECT_EQ(emu::pageable_async_copies(), pageable_before);
}

// A copy from pageable memory is correct but counted: on a GPU it would not overlap.
TEST_F(EmuInput, ACopyFromPageableMemoryIsCounted) {
  InputUploader up(Device::emu(0));
  Tensor pageable = Tensor::full({4}, 1.5f), pinned = Tensor::empty_pinned({4});
  ASSERT_TRUE(pinned.pinned());
  const int64_t before = emu::pageable_async_copies();
  expect_equal(pageable, up.finish(up.start({pageable}))[0], "pageable");
  EXPECT_EQ(emu::pageable_async_copies(), before + 1);
  for (int i = 0; i < 4; ++i) pinned.f32()[i] = static_cast<float>(i);
  expect_equal(pinned, up.finish(up.start({pinned}))[0], "pinned");
  EXPECT_EQ(emu::pageable_async_copies(), before + 1);
}

// A batch's block belongs to the copy stream; compute reads it later. Dropping the host's
// last reference before compute has run must not hand the block to the next batch (the
// uploader announces the compute stream, record_stream). The compute read is held back
// by a gate and holds only the address, as a kernel does.
TEST_F(EmuInput, ABatchIsNotReusedWhileComputeStillReadsIt) {
  const Device dev = Device::emu(0);
  InputUploader up(dev);
  Tensor first = Tensor::full({1 << 12}, 1.0f), second = Tensor::full({1 << 12}, 2.0f);
  Tensor on_device = up.finish(up.start({first}))[0];
  emu::Stream& compute = emu::current_stream(0);
  std::atomic<bool> open{false};
  auto seen = std::make_shared<float>(0.0f);
  compute.enqueue([&open] {
    while (!open.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  });
  const void* address = on_device.block_address();
  compute.enqueue([seen, address] { *seen = static_cast<const float*>(address)[0]; });
  on_device = Tensor();  // the host is done with the batch; compute is not
  const int64_t reused_before = emu::reused_blocks();
  Tensor next = up.finish(up.start({second}))[0];
  EXPECT_EQ(emu::reused_blocks(), reused_before) << "the batch's block went to the next one";
  open = true;
  compute.synchronize();
  EXPECT_EQ(*seen, 1.0f) << "compute read the first batch after its block was reused";
  expect_equal(second, next, "the second batch");
}

}  // namespace
}  // namespace st::test
