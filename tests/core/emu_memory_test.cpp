// The emulated device's memory follows CUDA's caching-allocator rules: a freed block goes
// straight back to the stream that allocated it, and to anyone else only once every
// stream announced with record_stream() has passed the free. A reused block is poisoned
// (0xFF bytes, NaN as float) in its new owner's stream order, so a kernel on a stream
// that was never announced reads NaN instead of values that happen to look right.
//
// The readers here hold a raw address, as a CUDA kernel does: a lambda capturing the
// Tensor would keep its storage alive and hide the very mistake under test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include "core/emu/memory.h"
#include "core/emu/stream.h"
#include "core/tensor.h"

namespace st::test {
namespace {

// Each test its own size class, so a block another test freed cannot be the one handed out.
constexpr int64_t kPoisonN = 1 << 12, kRecordedN = 1 << 13, kOneStreamN = 1 << 14;

// A task that holds its stream until open() (what a long kernel ahead of a read does).
class Gate {
 public:
  void hold(emu::Stream& s) {
    s.enqueue([this] {
      while (!open_.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
  }
  void open() { open_ = true; }

 private:
  std::atomic<bool> open_{false};
};

// Queues on `s`, after the gate, a read of the first float at `address`; returns where the
// value lands.
std::shared_ptr<float> read_later(emu::Stream& s, Gate& gate, const void* address) {
  auto seen = std::make_shared<float>(0.0f);
  gate.hold(s);
  s.enqueue([seen, address] { *seen = static_cast<const float*>(address)[0]; });
  return seen;
}

// A tensor of ones written on this thread's stream, and a read of it queued on `side`
// after the write, behind `gate`.
struct OnesReadLater {
  Tensor ones;
  const void* address;
  std::shared_ptr<float> seen;
};
OnesReadLater ones_read_later(emu::Stream& side, Gate& gate, int64_t n) {
  Tensor ones = Tensor::full({n}, 1.0f, Device::emu(0));  // the host thread's default stream
  emu::Event filled;
  filled.record(emu::current_stream(0));
  side.wait(filled);
  const void* address = ones.block_address();
  return {ones, address, read_later(side, gate, address)};
}

TEST(EmuMemory, AReusedBlockPoisonsAReaderWhoseStreamWasNotRecorded) {
  emu::Stream side(0);
  Gate gate;
  auto [t, address, seen] = ones_read_later(side, gate, kPoisonN);
  const int64_t reused_before = emu::reused_blocks();
  t = Tensor();  // freed with no record_stream(side): the block is free at once
  Tensor u = Tensor::empty({kPoisonN}, DType::F32, Device::emu(0));
  EXPECT_EQ(u.block_address(), address) << "the freed block went to the next allocation";
  EXPECT_EQ(emu::reused_blocks(), reused_before + 1);
  emu::current_stream(0).synchronize();  // the poison has run
  gate.open();
  side.synchronize();
  EXPECT_TRUE(std::isnan(*seen)) << "the unannounced reader saw " << *seen;
}

TEST(EmuMemory, ARecordedStreamKeepsItsBlockUntilItHasPassed) {
  emu::Stream side(0);
  Gate gate;
  auto [t, address, seen] = ones_read_later(side, gate, kRecordedN);
  emu::record_stream(address, side);
  t = Tensor();
  Tensor u = Tensor::full({kRecordedN}, 2.0f, Device::emu(0));
  EXPECT_NE(u.block_address(), address) << "reused while the side stream still reads it";
  emu::current_stream(0).synchronize();
  gate.open();
  side.synchronize();
  EXPECT_EQ(*seen, 1.0f);
  // Once the side stream has passed, the block serves this stream again.
  u = Tensor();
  Tensor w = Tensor::empty({kRecordedN}, DType::F32, Device::emu(0));
  Tensor x = Tensor::empty({kRecordedN}, DType::F32, Device::emu(0));
  EXPECT_TRUE(w.block_address() == address || x.block_address() == address);
}

TEST(EmuMemory, OneStreamReusesAtOnceInItsOwnOrder) {
  // Work queued before the free still reads the old values: the poison comes after it in
  // the same stream.
  emu::Stream& s = emu::current_stream(0);
  Tensor t = Tensor::full({kOneStreamN}, 3.0f, Device::emu(0));
  Gate gate;
  const void* address = t.block_address();
  auto seen = read_later(s, gate, address);
  t = Tensor();
  Tensor u =
      Tensor::empty({kOneStreamN}, DType::F32, Device::emu(0));  // queues the poison, no wait
  EXPECT_EQ(u.block_address(), address);
  gate.open();
  s.synchronize();
  EXPECT_EQ(*seen, 3.0f);
  EXPECT_TRUE(std::isnan(u.to_vector()[0])) << "a reused block starts as poison";
}

}  // namespace
}  // namespace st::test
