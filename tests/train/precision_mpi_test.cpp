// Mixed precision under mpirun: the 16-bit dense exchange (--comm-dtype) against the fp32
// one, the loss scaler's overflow decision taken together by all ranks, and an overflowed
// fp16 step skipped by the training loop (logged, the scale halved, the weights untouched).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "tests/comm/mpi_test_run.h"
#include "tests/train/fixed_image_task.h"
#include "tests/train/run_files.h"
#include "train/loss_scaler.h"
#include "train/training_loop.h"

namespace st::test {
namespace {

namespace fs = std::filesystem;

// Rank r's gradient: magnitudes over many binades, so rounding is visible everywhere.
Tensor rank_gradient(int rank, int64_t n) {
  Rng rng(100 + static_cast<uint64_t>(rank));
  Tensor g = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i)
    g.f32()[i] = rng.normal() * std::ldexp(1.0f, static_cast<int>(i % 20) - 10);
  return g;
}

void exchange(AllreduceHook& hook, Tensor& g) {
  Bucket b;
  b.numel = g.numel();
  hook.exchange(b, g, world(), 0);
}

// The 16-bit exchange equals the fp32 average within the rounding of each rank's share,
// sum_r |g_r| / P * u (u = 2^-8 for bf16, 2^-11 for fp16) plus fp32 summation noise
// (and, per rank, half of fp16's subnormal spacing 2^-24 below 2^-14: `tiny`), and exactly equals
// sum_r round16(g_r / P) summed in rank order on every rank.
void check_wire(Precision wire, double u, double tiny) {
  Communicator& comm = world();
  const int p = comm.size();
  const int64_t n = 1001;  // odd: the last 32-bit word carries one value
  Tensor dense = rank_gradient(comm.rank(), n), narrow = dense.clone();
  AllreduceHook fp32, half(wire);
  exchange(fp32, dense);
  exchange(half, narrow);
  std::vector<float> expect(n, 0.0f), bound(n, 0.0f);
  for (int r = 0; r < p; ++r) {
    const Tensor g = rank_gradient(r, n);
    for (int64_t i = 0; i < n; ++i) {
      const float share = g.f32()[i] * (1.0f / static_cast<float>(p));
      float rounded = 0;
      cpu::round_to(wire, &share, &rounded, 1);
      expect[i] += rounded;
      bound[i] += std::abs(share);
    }
  }
  int differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(narrow.f32()[i], expect[i]) << precision_name(wire) << " element " << i;
    ASSERT_LE(std::abs(narrow.f32()[i] - dense.f32()[i]), u * bound[i] + 1e-6 * bound[i] + p * tiny)
        << precision_name(wire) << " element " << i;
    differ += narrow.f32()[i] != dense.f32()[i];
  }
  EXPECT_GT(differ, n / 2) << "the 16-bit exchange shows no rounding";
}

TEST(CommDtype, Bf16ExchangeEqualsFp32WithinBf16Rounding) {
  check_wire(Precision::BF16, 0x1p-8, 0.0);
}

TEST(CommDtype, Fp16ExchangeEqualsFp32WithinFp16Rounding) {
  check_wire(Precision::F16, 0x1p-11, 0x1p-25);
}

// An inf on one rank only (e.g. a sparsified or local check): every rank skips.
TEST(LossScalerRanks, OverflowOnOneRankSkipsOnEveryRank) {
  Communicator& comm = world();
  LossScaler s;
  Tensor g = Tensor::full({4}, 2.0f);
  if (comm.rank() == comm.size() - 1) g.f32()[2] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(s.unscale_and_check(g, comm));
  EXPECT_EQ(s.scale(), 32768.0f);
  Tensor ok = Tensor::full({4}, 65536.0f);
  EXPECT_TRUE(s.unscale_and_check(ok, comm));
  EXPECT_EQ(ok.f32()[0], 2.0f);
}

constexpr int64_t kBatch = 8;  // per rank
constexpr int64_t kSteps = 3;

// Fixed data; each rank reads its own share of a step. With `inflate_step` >= 0 that
// step's loss gradient is multiplied by 1e4: scaled by 65536 it overflows fp16.
class FixedDataTask : public FixedImageTask {
 public:
  FixedDataTask(int rank, int world, int64_t inflate_step, int64_t drop_step,
                bool batchnorm = false)
      : FixedImageTask(conv_relu_fc_net(batchnorm), kBatch * world * kSteps, 9,
                       [](int64_t i) { return static_cast<int32_t>(i % 4); }),
        rank_(rank),
        world_(world),
        inflate_(inflate_step),
        drop_(drop_step) {}
  int64_t steps_per_epoch() const override { return drop_ >= 0 ? kSteps - 1 : kSteps; }
  void start_epoch(int64_t, int64_t first) override { step_ = first; }
  bool load_batch() override {
    if (step_ >= steps_per_epoch()) return false;
    const int64_t data_step = drop_ >= 0 && step_ >= drop_ ? step_ + 1 : step_;
    load_block((data_step * world_ + rank_) * kBatch, kBatch);
    inflated_ = step_ == inflate_;
    ++step_;
    return true;
  }
  Tensor loss_grad() override {
    Tensor g = FixedImageTask::loss_grad();
    if (inflated_)
      for (int64_t i = 0; i < g.numel(); ++i) g.f32()[i] *= 1e4f;
    return g;
  }
  float lr(int64_t, int64_t) const override { return 0.1f; }
  float end_epoch(int64_t, const Evaluation&) override { return 0.1f; }

 private:
  int rank_, world_;
  int64_t inflate_, drop_;
  int64_t step_ = 0;
  bool inflated_ = false;
};

// Rank 0's process id names the folders, so every rank can find rank 0's checkpoint.
std::string out_dir(const std::string& name) {
  static const long tag = static_cast<long>(
      world().allreduce_scalar(world().rank() == 0 ? static_cast<double>(::getpid()) : 0.0));
  return (fs::temp_directory_path() / ("st_prec_" + std::to_string(tag) + "_" + name)).string();
}

TrainConfig base_config() {
  TrainConfig c;
  c.epochs = 1;
  c.batch_size = kBatch;
  c.momentum = 0.9f;
  c.weight_decay = 1e-4f;
  c.quiet = true;
  c.checkpoint_minutes = 0;
  return c;
}

// The trained parameters, then (with `batchnorm`) the float buffers: BatchNorm's running
// statistics.
std::vector<float> train_params(const TrainConfig& base, int64_t inflate, int64_t drop,
                                const std::string& name, bool batchnorm = false) {
  Communicator& comm = world();
  TrainConfig c = base;
  c.out = out_dir(name + std::to_string(comm.rank()));
  if (c.resume.empty()) fs::remove_all(c.out);
  FixedDataTask task(comm.rank(), comm.size(), inflate, drop, batchnorm);
  run_training(c, task, comm);
  std::vector<float> values;
  for (Param* p : collect_params(task.model()))
    for (int64_t i = 0; i < p->value.numel(); ++i) values.push_back(p->value.f32()[i]);
  for (Buffer* b : collect_buffers(task.model()))
    if (b->value.dtype() == DType::F32)
      for (int64_t i = 0; i < b->value.numel(); ++i) values.push_back(b->value.f32()[i]);
  return values;
}

// Step 2 of 3 overflows: it is logged as skipped, the scale halves for step 3, and the
// weights end as in a run that never saw step 2's data (steps 1 and 3 only; loss scales
// are powers of two, so the scaled fp16 values round alike).
TEST(Fp16Training, OverflowedStepIsSkippedLoggedAndLowersTheScale) {
  TrainConfig c = base_config();
  c.precision = "fp16";
  const auto skipped = train_params(c, 1, -1, "skip");
  const auto without = train_params(c, -1, 1, "without");
  if (world().rank() == 0) {
    const std::string dir = out_dir("skip0");
    EXPECT_EQ(run_column(dir, "skipped"), (std::vector<std::string>{"0", "1", "0"}));
    EXPECT_EQ(run_column(dir, "loss_scale"), (std::vector<std::string>{"65536", "65536", "32768"}));
  }
  ASSERT_EQ(skipped.size(), without.size());
  for (size_t i = 0; i < skipped.size(); ++i)
    ASSERT_NEAR(skipped[i], without[i], 1e-6f * (1.0f + std::abs(without[i]))) << "parameter " << i;
}

// A skipped step leaves no trace: the BatchNorm running statistics its overflowed forward
// updated are put back, so they equal those of a run that never saw that step's data.
TEST(Fp16Training, SkippedStepLeavesBatchNormStatisticsAsBefore) {
  TrainConfig c = base_config();
  c.precision = "fp16";
  const auto skipped = train_params(c, 1, -1, "bn_skip", true);
  const auto without = train_params(c, -1, 1, "bn_without", true);
  ASSERT_EQ(skipped.size(), without.size());
  for (size_t i = 0; i < skipped.size(); ++i)
    ASSERT_NEAR(skipped[i], without[i], 1e-6f * (1.0f + std::abs(without[i]))) << "value " << i;
}

// The loss scaler's state lives in the checkpoint: a run stopped after the overflowed
// step and resumed continues at the lowered scale and ends on the uninterrupted weights.
TEST(Fp16Training, ResumeRestoresTheLossScale) {
  TrainConfig c = base_config();
  c.precision = "fp16";
  const auto whole = train_params(c, 1, -1, "whole");
  c.max_iters = 2;
  train_params(c, 1, -1, "part");
  c.max_iters = 0;
  c.resume = out_dir("part0") + "/checkpoint.safetensors";  // only rank 0 writes one
  // The resumed run writes into the stopped run's folder.
  const auto resumed = train_params(c, 1, -1, "part");
  if (world().rank() == 0) {
    EXPECT_EQ(run_column(out_dir("part0"), "loss_scale"),
              (std::vector<std::string>{"65536", "65536", "32768"}));
  }
  ASSERT_EQ(whole.size(), resumed.size());
  for (size_t i = 0; i < whole.size(); ++i) ASSERT_EQ(resumed[i], whole[i]) << "parameter " << i;
}

// Through the loop: the 16-bit exchange trains to nearly the fp32 exchange's weights.
TEST(CommDtype, Bf16TrainingStaysCloseToFp32Exchange) {
  TrainConfig c = base_config();
  const auto fp32 = train_params(c, -1, -1, "wire32");
  c.comm_dtype = "bf16";
  const auto bf16 = train_params(c, -1, -1, "wire16");
  ASSERT_EQ(fp32.size(), bf16.size());
  double max_diff = 0;
  for (size_t i = 0; i < fp32.size(); ++i) {
    ASSERT_NEAR(bf16[i], fp32[i], 2e-3f * (1.0f + std::abs(fp32[i]))) << "parameter " << i;
    max_diff = std::max(max_diff, static_cast<double>(std::abs(bf16[i] - fp32[i])));
  }
  EXPECT_GT(max_diff, 0.0) << "--comm-dtype bf16 left the exchange bit-identical to fp32";
}

}  // namespace
}  // namespace st::test
