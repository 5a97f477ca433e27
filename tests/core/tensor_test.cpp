#include <gtest/gtest.h>

#include <cstdint>

#include "core/device.h"
#include "core/host_allocator.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace st::test {
namespace {

TEST(Tensor, CpuStorageIs64ByteAligned) {
  for (int n : {1, 3, 17, 1000}) {
    Tensor t = Tensor::empty({n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u) << n;
  }
}

TEST(Tensor, ViewsShareStorage) {
  Tensor flat = Tensor::zeros({10});
  Tensor v = flat.slice_flat(4, {2, 3});
  v.fill(2.0f);
  std::vector<float> all = flat.to_vector();
  EXPECT_EQ(all[3], 0.0f);
  EXPECT_EQ(all[4], 2.0f);
  EXPECT_EQ(all[9], 2.0f);
  EXPECT_TRUE(v.shares_storage(flat));
  EXPECT_THROW(flat.slice_flat(5, {6}), Error);
}

TEST(Tensor, DtypeChecked) {
  Tensor t = Tensor::zeros({3}, DType::I64);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_THROW(t.data<float>(), Error);
  EXPECT_NO_THROW(t.data<int64_t>());
}

TEST(Tensor, ReshapeNeedsSameCount) {
  Tensor t = Tensor::zeros({2, 6});
  EXPECT_EQ(t.reshape({3, 4}).shape(), Shape({3, 4}));
  EXPECT_THROW(t.reshape({5}), Error);
}

TEST(Device, CpuAlwaysAvailableAndGpuRequestIsClear) {
  EXPECT_TRUE(parse_device("cpu").is_cpu());
  if (cuda_device_count() == 0) {
    EXPECT_TRUE(parse_device("auto").is_cpu());
    try {
      parse_device("cuda");
      FAIL() << "asking for a GPU that does not exist must throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_device("tpu"), Error);
}

// Philox4x32-10 known-answer test from the Random123 distribution (kat_vectors):
// counter = 0, key = 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8.
TEST(Rng, PhiloxKnownAnswer) {
  Philox4 c{{0, 0, 0, 0}};
  Philox4 r = philox4x32(c, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
}

TEST(Rng, UniformInRangeAndSeeded) {
  Rng a(5), b(5), c(6);
  double mean = 0;
  for (int i = 0; i < 10000; ++i) {
    float u = a.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    mean += u;
    EXPECT_EQ(u, b.uniform());
  }
  EXPECT_NEAR(mean / 10000, 0.5, 0.02);
  EXPECT_NE(Rng(5).uniform(), c.uniform());
}

// The host generator's draws are philox_uniform's, numbered by its counter, also across a
// change of stream or state in the middle of a block (the generator keeps the last block).
TEST(Rng, SequentialDrawsArePhiloxUniformByCounter) {
  Rng r(7);
  uint64_t counter = 0;
  for (int i = 0; i < 6; ++i) ASSERT_EQ(r.uniform(), philox_uniform(7, 1ull << 63, counter++)) << i;
  r.next_stream();  // stream 1 from the 7th number on, the block's index unchanged
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(r.uniform(), philox_uniform(7, 1 | (1ull << 63), counter++)) << i;
  r.set_state(8, 1);  // another seed, same stream and counter
  ASSERT_EQ(r.uniform(), philox_uniform(8, 1 | (1ull << 63), counter++));
  r.set_state(7, 0);  // back to the first block's key
  ASSERT_EQ(r.uniform(), philox_uniform(7, 1ull << 63, counter++));
}

}  // namespace
}  // namespace st::test

namespace st::test {
namespace {

TEST(HostAllocator, ReusesFreedLargeBlocksAndCountsBytes) {
  const host::Stats before = host::stats();
  void* first;
  {
    Tensor big = Tensor::empty({1 << 20});  // 4 MB: cached on release
    first = big.raw();
    EXPECT_GE(host::stats().in_use, before.in_use + (4u << 20));
  }
  EXPECT_GE(host::stats().cached, 4u << 20);
  Tensor again = Tensor::empty({1 << 20});
  EXPECT_EQ(again.raw(), first);  // the same block comes back, no new pages
  host::empty_cache();
  EXPECT_EQ(host::stats().cached, 0u);
}

}  // namespace
}  // namespace st::test
