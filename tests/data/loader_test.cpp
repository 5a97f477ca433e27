#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/timer.h"
#include "data/loader.h"
#include "data/synthetic.h"

namespace st::test {
namespace {

std::shared_ptr<Dataset> augmented(int64_t n) {
  Transform t;
  t.random_crop(12, 2).horizontal_flip().normalize({{0.5f, 0.4f, 0.3f}, {0.2f, 0.2f, 0.2f}});
  return std::make_shared<SyntheticDataset>(n, Shape({3, 12, 12}), 5, 11, t);
}

std::vector<Batch> epoch(DataLoader& loader, int64_t e, int64_t skip = 0) {
  loader.start_epoch(e, skip);
  std::vector<Batch> out;
  while (std::optional<Batch> b = loader.next()) out.push_back(std::move(*b));
  return out;
}

void expect_same(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].index, b[i].index);
    ASSERT_EQ(a[i].images.shape(), b[i].images.shape());
    EXPECT_EQ(a[i].images.to_vector(), b[i].images.to_vector()) << "batch " << i;
    const int32_t* la = a[i].labels.data<int32_t>();
    const int32_t* lb = b[i].labels.data<int32_t>();
    for (int64_t k = 0; k < a[i].labels.numel(); ++k) EXPECT_EQ(la[k], lb[k]);
  }
}

TEST(DataLoader, SameBatchesForAnyWorkerCount) {
  auto ds = augmented(103);
  DistributedSampler sampler(ds->size(), {.seed = 5});
  DataLoader l0(ds, sampler, {.batch_size = 10, .workers = 0, .seed = 2});
  DataLoader l1(ds, sampler, {.batch_size = 10, .workers = 1, .seed = 2});
  DataLoader l3(ds, sampler, {.batch_size = 10, .workers = 3, .prefetch = 4, .seed = 2});
  EXPECT_EQ(l1.batches_per_epoch(), 11);
  for (int64_t e : {0, 1}) {
    std::vector<Batch> b1 = epoch(l1, e);
    ASSERT_EQ(b1.size(), 11u);
    EXPECT_EQ(b1.back().images.shape(), Shape({3, 3, 12, 12}));  // the partial last batch
    EXPECT_EQ(b1.back().labels.shape(), Shape({3}));
    expect_same(b1, epoch(l3, e));
    expect_same(b1, epoch(l0, e));
  }
}

TEST(DataLoader, BatchesFollowTheSamplerAndSampleSeeds) {
  auto ds = augmented(40);
  DistributedSampler sampler(ds->size(), {.rank = 1, .world_size = 2, .seed = 4});
  DataLoader loader(ds, sampler, {.batch_size = 8, .workers = 2, .seed = 6, .drop_last = true});
  std::vector<Batch> got = epoch(loader, 3);
  ASSERT_EQ(got.size(), 2u);  // 20 examples per rank, partial batch dropped
  std::vector<int64_t> order = sampler.indices(3);
  for (size_t b = 0; b < got.size(); ++b) {
    for (int k = 0; k < 8; ++k) {
      int64_t idx = order[b * 8 + k];
      SampleRng rng(6, 3, static_cast<uint64_t>(idx));
      Example want = ds->get(idx, rng);
      EXPECT_EQ(got[b].labels.data<int32_t>()[k], want.label);
      std::vector<float> all = got[b].images.to_vector();
      std::vector<float> mine(all.begin() + k * 432, all.begin() + (k + 1) * 432);
      EXPECT_EQ(mine, want.image.to_vector());
    }
  }
}

TEST(DataLoader, SkippingBatchesResumesMidEpoch) {
  auto ds = augmented(64);
  DistributedSampler sampler(ds->size(), {.seed = 1});
  DataLoader loader(ds, sampler, {.batch_size = 8, .workers = 2, .seed = 3});
  std::vector<Batch> full = epoch(loader, 2);
  std::vector<Batch> resumed = epoch(loader, 2, 5);
  ASSERT_EQ(resumed.size(), 3u);
  expect_same(std::vector<Batch>(full.begin() + 5, full.end()), resumed);
  EXPECT_TRUE(epoch(loader, 2, 8).empty());
  EXPECT_THROW(loader.start_epoch(2, 9), Error);
}

// Sleeps per example, to make work in flight when the loader goes away; example `bad`
// fails like a corrupt file.
class SlowDataset : public Dataset {
 public:
  explicit SlowDataset(int64_t bad = -1) : bad_(bad) {}
  std::string name() const override { return "slow"; }
  int64_t size() const override { return 1000; }
  int num_classes() const override { return 2; }
  Shape example_shape() const override { return Shape({1, 2, 2}); }
  int32_t get_into(int64_t index, SampleRng&, float* out) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (index == bad_) throw Error("slow: /data/bad_13.JPEG: cannot decode image (bad huffman)");
    std::fill(out, out + 4, static_cast<float>(index));
    return static_cast<int32_t>(index % 2);
  }

 private:
  int64_t bad_;
};

TEST(DataLoader, DestroyedMidEpochShutsDownPromptly) {
  auto ds = std::make_shared<SlowDataset>();
  Timer timer;
  {
    DataLoader loader(ds, DistributedSampler(ds->size(), {.shuffle = false}),
                      {.batch_size = 100, .workers = 3, .prefetch = 3});
    loader.start_epoch(0);
    EXPECT_TRUE(loader.next().has_value());
    // Restarting an epoch while batches are in flight discards them.
    loader.start_epoch(1);
    EXPECT_TRUE(loader.next().has_value());
  }
  // Three batches of 100 x 2 ms would take 0.2 s each; shutdown stops after one sample.
  EXPECT_LT(timer.seconds(), 2.0);
}

TEST(DataLoader, NextBeforeStartEpochThrows) {
  auto ds = std::make_shared<SlowDataset>();
  DataLoader loader(ds, DistributedSampler(ds->size(), {.shuffle = false}),
                    {.batch_size = 10, .workers = 2});
  EXPECT_THROW(loader.next(), Error);  // before start_epoch
}

TEST(DataLoader, WorkerErrorIsRethrownThenLoadingContinues) {
  auto ds = std::make_shared<SlowDataset>(13);
  DistributedSampler sampler(ds->size(), {.shuffle = false});
  DataLoader loader(ds, sampler, {.batch_size = 10, .workers = 2});
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next().has_value());  // examples 0..9
  try {
    loader.next();  // examples 10..19 include the bad one
    FAIL() << "the worker's error must reach the consumer";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("bad_13.JPEG"), std::string::npos) << msg;
    EXPECT_NE(msg.find("batch 1"), std::string::npos) << msg;
  }
  std::optional<Batch> b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->index, 2);
  EXPECT_EQ(b->images.to_vector()[0], 20.0f);
}

}  // namespace
}  // namespace st::test
