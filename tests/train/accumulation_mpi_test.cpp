// Gradient accumulation (and AdamW) through the training loop, under mpirun with P ranks: for a
// global batch of G examples per optimiser step,
//   (a) one rank, --accum-steps P micro-batches of G / P,
//   (b) one rank, one batch of G,
//   (c) P ranks, one batch of G / P each,
// take the same steps (a network without BatchNorm, so the split does not change the
// gradient). With a sparsifier, the exchange (and its error feedback) runs once per
// optimiser step, not once per micro-batch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "tests/comm/mpi_test_run.h"
#include "tests/train/fixed_image_task.h"
#include "tests/train/run_files.h"
#include "train/training_loop.h"

namespace st::test {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kGlobalBatch = 32;
constexpr int64_t kSteps = 3;

// A fixed dataset; step s, micro-batch k of this rank reads a contiguous block of the
// step's G examples: rank r's share, then micro-batch k's share of that.
class FixedDataTask : public FixedImageTask {
 public:
  FixedDataTask(int rank, int world, int accum)
      : FixedImageTask(conv_relu_fc_net(false), kGlobalBatch * kSteps, 9,
                       [](int64_t i) { return static_cast<int32_t>(i % 4); }),
        rank_(rank),
        world_(world),
        accum_(accum) {}
  int64_t steps_per_epoch() const override { return kSteps * accum_; }
  void start_epoch(int64_t, int64_t first) override { micro_ = first; }
  bool load_batch() override {
    if (micro_ >= steps_per_epoch()) return false;
    const int64_t per_rank = kGlobalBatch / world_, per_micro = per_rank / accum_;
    const int64_t step = micro_ / accum_, k = micro_ % accum_;
    load_block(step * kGlobalBatch + rank_ * per_rank + k * per_micro, per_micro);
    ++micro_;
    return true;
  }
  float lr(int64_t, int64_t) const override { return 0.1f; }
  float end_epoch(int64_t, const Evaluation&) override { return 0.1f; }

 private:
  int rank_, world_, accum_;
  int64_t micro_ = 0;
};

std::string out_dir(const std::string& name) {
  return (fs::temp_directory_path() / ("st_accum_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// Parameters after training, in registration order.
std::vector<float> train_params(int rank, int world, int accum, const TrainConfig& base,
                                Communicator& comm, const std::string& name) {
  TrainConfig c = base;
  c.out = out_dir(name);
  fs::remove_all(c.out);
  c.batch_size = kGlobalBatch / world / accum;
  c.accum_steps = accum;
  FixedDataTask task(rank, world, accum);
  run_training(c, task, comm);
  std::vector<float> values;
  for (Param* p : collect_params(task.model()))
    for (int64_t i = 0; i < p->value.numel(); ++i) values.push_back(p->value.f32()[i]);
  return values;
}

TrainConfig base_config() {
  TrainConfig c;
  c.epochs = 1;
  c.momentum = 0.9f;
  c.weight_decay = 1e-4f;
  c.quiet = true;
  c.checkpoint_minutes = 0;
  c.bucket_cap_mb = 0.001;  // several buckets
  c.first_bucket_mb = 0.001;
  return c;
}

TEST(Accumulation, MicroBatchesEqualRanksEqualOneBigBatch) {
  Communicator& comm = world();
  const int P = comm.size();
  auto local = make_communicator("local");
  const TrainConfig c = base_config();
  const std::string me = std::to_string(comm.rank());
  const auto big = train_params(0, 1, 1, c, *local, "big" + me);
  const auto micro = train_params(0, 1, P, c, *local, "micro" + me);
  const auto ranks = train_params(comm.rank(), P, 1, c, comm, "ranks" + me);
  ASSERT_EQ(big.size(), micro.size());
  ASSERT_EQ(big.size(), ranks.size());
  for (size_t i = 0; i < big.size(); ++i) {
    ASSERT_NEAR(micro[i], big[i], 1e-5f * (1.0f + std::abs(big[i]))) << "parameter value " << i;
    ASSERT_NEAR(ranks[i], big[i], 1e-5f * (1.0f + std::abs(big[i]))) << "parameter value " << i;
  }
}

// The same with AdamW: the optimiser's state evolves identically on every layout.
TEST(Accumulation, AdamWStepsAgreeAcrossLayouts) {
  Communicator& comm = world();
  const int P = comm.size();
  auto local = make_communicator("local");
  TrainConfig c = base_config();
  c.optimizer = "adamw";
  c.lr = 0.01f;
  c.weight_decay = 0.01f;
  const std::string me = std::to_string(comm.rank());
  const auto big = train_params(0, 1, 1, c, *local, "adamw_big" + me);
  const auto micro = train_params(0, 1, P, c, *local, "adamw_micro" + me);
  const auto ranks = train_params(comm.rank(), P, 1, c, comm, "adamw_ranks" + me);
  ASSERT_EQ(big.size(), ranks.size());
  for (size_t i = 0; i < big.size(); ++i) {
    ASSERT_NEAR(micro[i], big[i], 1e-4f * (1.0f + std::abs(big[i]))) << "parameter value " << i;
    ASSERT_NEAR(ranks[i], big[i], 1e-4f * (1.0f + std::abs(big[i]))) << "parameter value " << i;
  }
}

// The sparsifier's count k per optimiser step: summed over one exchange of every bucket.
// Were micro-batches exchanged too, the step's statistics would hold several exchanges.
TEST(Accumulation, SparsifiedExchangeRunsOncePerOptimiserStep) {
  auto local = make_communicator("local");
  TrainConfig c = base_config();
  c.sparsifier = "topk";
  c.density = 0.1;
  const std::string big = "sp_big" + std::to_string(world().rank());
  const std::string micro = "sp_micro" + std::to_string(world().rank());
  train_params(0, 1, 1, c, *local, big);
  train_params(0, 1, 4, c, *local, micro);
  const auto k_big = run_column(out_dir(big), "sp_k");
  const auto k_micro = run_column(out_dir(micro), "sp_k");
  ASSERT_EQ(k_big.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(k_micro, k_big);
  EXPECT_EQ(run_column(out_dir(micro), "step").back(), std::to_string(kSteps));
}

// Micro-batch i reads the next sizes[i] examples of the fixed data (one rank).
class BlocksTask : public FixedDataTask {
 public:
  explicit BlocksTask(std::vector<int64_t> sizes)
      : FixedDataTask(0, 1, 1), sizes_(std::move(sizes)) {}
  int64_t steps_per_epoch() const override { return static_cast<int64_t>(sizes_.size()); }
  void start_epoch(int64_t, int64_t first) override {
    next_ = static_cast<size_t>(first);
    offset_ = 0;
    for (size_t i = 0; i < next_; ++i) offset_ += sizes_[i];
  }
  bool load_batch() override {
    if (next_ >= sizes_.size()) return false;
    load_block(offset_, sizes_[next_]);
    offset_ += sizes_[next_++];
    return true;
  }

 private:
  std::vector<int64_t> sizes_;
  size_t next_ = 0;
  int64_t offset_ = 0;
};

std::vector<float> train_blocks(const std::vector<int64_t>& sizes, int accum, int64_t& steps,
                                const std::string& name) {
  auto local = make_communicator("local");
  TrainConfig c = base_config();
  c.momentum = 0.0f;
  c.out = out_dir(name);
  fs::remove_all(c.out);
  c.batch_size = sizes[0];
  c.accum_steps = accum;
  BlocksTask task(sizes);
  steps = run_training(c, task, *local).steps;
  std::vector<float> values;
  for (Param* p : collect_params(task.model()))
    for (int64_t i = 0; i < p->value.numel(); ++i) values.push_back(p->value.f32()[i]);
  fs::remove_all(c.out);
  return values;
}

// An epoch whose micro-batches do not fill the last group: that group is a shorter step
// whose gradient is the mean over the micro-batches it has (none are dropped). Three
// micro-batches of 8 under --accum-steps 2 take the steps of batches 16 and 8.
TEST(Accumulation, EpochRemainderIsAShorterStep) {
  int64_t steps_accum = 0, steps_plain = 0;
  const auto accum = train_blocks({8, 8, 8}, 2, steps_accum, "rem_accum");
  const auto plain = train_blocks({16, 8}, 1, steps_plain, "rem_plain");
  EXPECT_EQ(steps_accum, 2);
  EXPECT_EQ(steps_plain, 2);
  ASSERT_EQ(accum.size(), plain.size());
  for (size_t i = 0; i < accum.size(); ++i)
    ASSERT_NEAR(accum[i], plain[i], 1e-5f * (1.0f + std::abs(plain[i]))) << "parameter " << i;
  // More micro-batches per step than the epoch has: one step over all of them.
  const auto all = train_blocks({8, 8, 8}, 17, steps_accum, "rem_all");
  const auto one = train_blocks({24}, 1, steps_plain, "rem_one");
  EXPECT_EQ(steps_accum, 1);
  for (size_t i = 0; i < all.size(); ++i)
    ASSERT_NEAR(all[i], one[i], 1e-5f * (1.0f + std::abs(one[i]))) << "parameter " << i;
}

}  // namespace
}  // namespace st::test
