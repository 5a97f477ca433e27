// Overlap with the next forward through the training loop, under mpirun with P ranks:
// each bucket's update applied as its exchange ends and the next forward waiting per
// layer must take exactly the steps of the step-end update (without --forward-overlap): the
// same parameters, optimiser state and loss curve, bit for bit, dense and sparsified,
// with SGD (momentum, Nesterov) and AdamW, across an epoch end and a checkpoint.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "layers/conv2d.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/sequential.h"
#include "layers/softmax_cross_entropy.h"
#include "tests/comm/mpi_test_run.h"
#include "tests/train/fixed_image_task.h"
#include "tests/train/run_files.h"
#include "train/exchange_order_probe.h"
#include "train/training_loop.h"

namespace st::test {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kBatch = 8;  // per rank
constexpr int64_t kSteps = 5;  // per epoch

// Fixed data; rank r reads its own block of every step. Records whether the forward ran
// with the per-parameter waits installed (the forward-overlap path).
class OverlapTask : public FixedImageTask {
 public:
  OverlapTask(int rank, int world)
      : FixedImageTask(two_conv_net(), kBatch * world * kSteps, 3,
                       [](int64_t i) { return static_cast<int32_t>((i * 7) % 4); }),
        rank_(rank),
        world_(world) {}
  int64_t steps_per_epoch() const override { return kSteps; }
  void start_epoch(int64_t, int64_t first) override { step_ = first; }
  bool load_batch() override {
    if (step_ >= kSteps) return false;
    load_block((step_ * world_ + rank_) * kBatch, kBatch);
    ++step_;
    return true;
  }
  StepLoss forward_loss() override {
    bool waits = false;
    for (Param* p : collect_params(net())) waits = waits || p->before_forward;
    waits_installed_ = waits_installed_ || waits;
    waits_per_forward_.push_back(waits);
    return FixedImageTask::forward_loss();
  }
  float lr(int64_t epoch, int64_t b) const override {
    return 0.05f / static_cast<float>(1 + epoch * kSteps + b);  // a new rate every step
  }
  Evaluation evaluate(bool) override {
    // Reads the parameters: every in-flight update must have landed.
    double sum = 0;
    for (Param* p : collect_params(net()))
      for (int64_t i = 0; i < p->value.numel(); ++i) sum += p->value.f32()[i];
    return {{{"param_sum", sum}}, "", 0.0};
  }
  float end_epoch(int64_t, const Evaluation&) override { return 0.05f; }
  // Inside the backward phase, after every gradient is ready: a backward this much longer
  // than any exchange of this small model, so the probe holds nothing back.
  void after_step() override {
    if (slow_backward_ms_ > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(slow_backward_ms_));
  }
  void set_slow_backward_ms(int ms) { slow_backward_ms_ = ms; }
  bool waits_installed() const { return waits_installed_; }
  const std::vector<bool>& waits_per_forward() const { return waits_per_forward_; }

 private:
  // Two convolutions and two linear layers, so the exchange has several buckets.
  static std::unique_ptr<Sequential> two_conv_net() {
    Rng rng(11);
    auto net = std::make_unique<Sequential>();
    net->add("conv1", std::make_unique<Conv2d>(3, 8, 3, 1, 1, true, rng));
    net->add("relu1", std::make_unique<ReLU>());
    net->add("conv2", std::make_unique<Conv2d>(8, 8, 3, 1, 1, true, rng));
    net->add("relu2", std::make_unique<ReLU>());
    net->add("flat", std::make_unique<Flatten>());
    net->add("fc1", std::make_unique<Linear>(8 * 36, 16, true, rng));
    net->add("relu3", std::make_unique<ReLU>());
    net->add("fc2", std::make_unique<Linear>(16, 4, true, rng));
    return net;
  }

  int rank_, world_;
  int slow_backward_ms_ = 0;
  int64_t step_ = 0;
  bool waits_installed_ = false;
  std::vector<bool> waits_per_forward_;
};

std::string out_dir(const std::string& name) {
  return (fs::temp_directory_path() / ("st_fwd_overlap_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

struct TrainedRun {
  std::vector<float> params;  // after training, in registration order
  std::vector<std::string> loss, param_sum;
  std::vector<std::string> sp_k;  // the sparsifier's count per step (empty when dense)
  bool waits_installed = false;
  std::vector<bool> waits_per_forward;  // one per forward (micro-batch), in order
};

TrainedRun train(TrainConfig c, bool forward_overlap, const std::string& name,
                 int slow_backward_ms = 0) {
  Communicator& comm = world();
  c.forward_overlap = forward_overlap;
  c.out = out_dir(name + (forward_overlap ? "_on" : "_off"));
  if (comm.rank() == 0) fs::remove_all(c.out);
  comm.barrier();
  OverlapTask task(comm.rank(), comm.size());
  task.set_slow_backward_ms(slow_backward_ms);
  run_training(c, task, comm);
  TrainedRun r;
  for (Param* p : collect_params(task.model()))
    for (int64_t i = 0; i < p->value.numel(); ++i) r.params.push_back(p->value.f32()[i]);
  r.waits_installed = task.waits_installed();
  r.waits_per_forward = task.waits_per_forward();
  r.loss = run_column(c.out, "loss");
  r.sp_k = run_column(c.out, "sp_k");
  r.param_sum = csv_column(c.out + "/epochs.csv", "param_sum");
  comm.barrier();
  if (comm.rank() == 0) fs::remove_all(c.out);
  return r;
}

TrainConfig base_config() {
  TrainConfig c;
  c.epochs = 2;
  c.batch_size = kBatch;
  c.momentum = 0.9f;
  c.weight_decay = 1e-4f;
  c.quiet = true;
  c.checkpoint_minutes = 0;
  c.checkpoint_every = 3;   // a mid-epoch checkpoint reads the optimiser state
  c.bucket_cap_mb = 0.002;  // several buckets
  c.first_bucket_mb = 0.001;
  return c;
}

// Both runs on every rank: the same parameters (bit for bit), the same loss curve (on
// rank 0, which writes it; `steps` rows over the two epochs) and the same evaluations.
void expect_same_steps(const TrainConfig& c, const std::string& name, size_t steps = 2 * kSteps) {
  const TrainedRun on = train(c, true, name), off = train(c, false, name);
  EXPECT_TRUE(on.waits_installed) << "the run did not take the forward-overlap path";
  EXPECT_FALSE(off.waits_installed)
      << "without --forward-overlap the run still waited per parameter";
  ASSERT_EQ(on.params.size(), off.params.size());
  EXPECT_EQ(0, std::memcmp(on.params.data(), off.params.data(), on.params.size() * sizeof(float)))
      << name << ": the parameters differ";
  if (world().rank() != 0) return;
  ASSERT_EQ(on.loss.size(), steps);
  EXPECT_EQ(on.loss, off.loss) << name << ": the loss curves differ";
  // A step's row holds its own buckets' statistics, though they finish in the next step.
  EXPECT_EQ(on.sp_k, off.sp_k) << name << ": the sparsifier's statistics moved between rows";
  ASSERT_EQ(on.param_sum.size(), 2u);
  EXPECT_EQ(on.param_sum, off.param_sum) << name << ": an evaluation saw other parameters";
}

// The default (--first-layers-first -1) measures steps 2-5 and changes the exchange
// order before step 6 of the ten.
TEST(ForwardOverlap, DenseSgdTakesTheSameSteps) {
  expect_same_steps(base_config(), "dense_sgd");
}

TEST(ForwardOverlap, NesterovInReadyOrderTakesTheSameSteps) {
  TrainConfig c = base_config();
  c.nesterov = true;
  c.first_layers_first = 0;
  expect_same_steps(c, "nesterov_ready_order");
}

TEST(ForwardOverlap, AdamWFirstLayersFirstTakesTheSameSteps) {
  TrainConfig c = base_config();
  c.optimizer = "adamw";
  c.lr = 0.01f;
  c.weight_decay = 0.01f;
  c.first_layers_first = 1;
  expect_same_steps(c, "adamw_reversed");
}

TEST(ForwardOverlap, TopkWithErrorFeedbackTakesTheSameSteps) {
  TrainConfig c = base_config();
  c.sparsifier = "topk";
  c.density = 0.1;
  c.first_layers_first = 0.3;
  expect_same_steps(c, "topk");
}

TEST(ForwardOverlap, AccumulatedMicroBatchesTakeTheSameSteps) {
  TrainConfig c = base_config();
  c.accum_steps = 2;  // the task's five batches make steps of two, two and one
  expect_same_steps(c, "accum", 2 * 3);
}

// A backward much longer than the exchange: the probe (steps 2-5) holds nothing back.
// It decides after step 6's forward, which still waited per layer; step 6 ends with the
// update, and from step 7 the forward no longer waits; the checkpoints after steps 6 and
// 9 and the epochs' ends run on the same path. The same steps as without forward overlap.
// (Those checkpoints must wait for the schedule's polls still queued on the communication
// thread: on a slow link the ranks hung in mismatched collectives without it. Here the
// polls are usually done in time, so this test cannot be relied on to show that.)
TEST(ForwardOverlap, ProbeThatHoldsNothingBackEndsIt) {
  constexpr int kSlowMs = 40;
  const TrainedRun on = train(base_config(), true, "probe_off", kSlowMs);
  const TrainedRun off = train(base_config(), false, "probe_off", kSlowMs);
  ASSERT_EQ(on.waits_per_forward.size(), 2 * kSteps);
  for (size_t i = 0; i < on.waits_per_forward.size(); ++i)
    EXPECT_EQ(on.waits_per_forward[i], i < 6) << "forward " << i;
  ASSERT_EQ(on.params.size(), off.params.size());
  EXPECT_EQ(0, std::memcmp(on.params.data(), off.params.data(), on.params.size() * sizeof(float)))
      << "the parameters differ";
  if (world().rank() == 0) {
    EXPECT_EQ(on.loss, off.loss) << "the loss curves differ";
  }
}

// Global-norm clipping needs every bucket's result: the run keeps the step-end update.
TEST(ForwardOverlap, GlobalClipKeepsTheStepEndUpdate) {
  TrainConfig c = base_config();
  c.clip = 0.5f;
  const TrainedRun on = train(c, true, "clip");
  EXPECT_FALSE(on.waits_installed);
}

// The exchange order depends on the plan only: the held-back buckets (first layers) go
// last and first layer first; the share is of elements, whole buckets rounded down.
TEST(ExchangeOrder, HoldsBackTheFirstLayersShare) {
  const std::vector<int64_t> numels = {40, 30, 20, 10};  // bucket 3 holds the first layers
  EXPECT_EQ(exchange_order(numels, 0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(exchange_order(numels, 0.05), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(exchange_order(numels, 0.1), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(exchange_order(numels, 0.3), (std::vector<int>{0, 1, 3, 2}));
  EXPECT_EQ(exchange_order(numels, 0.59), (std::vector<int>{0, 1, 3, 2}));
  EXPECT_EQ(exchange_order(numels, 0.6), (std::vector<int>{0, 3, 2, 1}));
  EXPECT_EQ(exchange_order(numels, 1), (std::vector<int>{3, 2, 1, 0}));
}

// Held back: what the link cannot fill during backward; nothing when backward is longer.
TEST(ExchangeOrderProbe, HoldsBackWhatBackwardCannotCover) {
  EXPECT_DOUBLE_EQ(ExchangeOrderProbe::share(60, 150), 0.6);
  EXPECT_DOUBLE_EQ(ExchangeOrderProbe::share(150, 150), 0.0);
  EXPECT_DOUBLE_EQ(ExchangeOrderProbe::share(300, 150), 0.0);
  EXPECT_DOUBLE_EQ(ExchangeOrderProbe::share(0, 150), 1.0);
  EXPECT_DOUBLE_EQ(ExchangeOrderProbe::share(60, 0), 0.0);  // a single rank exchanges nothing
}

}  // namespace
}  // namespace st::test
