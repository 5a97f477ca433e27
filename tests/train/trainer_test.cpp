// Training loop: exact resume, NaN handling, and a real-data smoke test.
#include "train/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "comm/communicator.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/sequential.h"
#include "models/registry.h"
#include "tests/train/run_files.h"
#include "train/checkpoint.h"

namespace st::test {
namespace {

std::string fresh_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() /
           ("st_train_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(p);
  return p.string();
}

TrainConfig tiny_config(const std::string& out) {
  TrainConfig c;
  c.arch = "small_cnn";
  c.dataset = "synthetic";
  c.synthetic_size = 384;
  c.batch_size = 32;
  c.epochs = 2;
  c.lr = 0.05f;
  c.schedule = "cosine";
  c.warmup_epochs = 0.5;
  c.workers = 2;
  c.threads = 2;
  c.out = out;
  c.quiet = true;
  c.eval_batches = 2;
  return c;
}

// Trains config(dir) (2 epochs of 12 steps) in one go, and again stopped at step 17 (mid-
// epoch 2) and resumed; every step's logged loss must be the same bit for bit. `stopped`
// sees the stopped run's checkpoint.
void expect_exact_resume(const std::string& name,
                         const std::function<TrainConfig(const std::string&)>& config,
                         const std::function<void(const std::string&)>& stopped = {}) {
  const std::string a = fresh_dir(name + "_full"), b = fresh_dir(name + "_split");
  train(config(a));
  TrainConfig first = config(b);
  first.max_iters = 17;
  train(first);
  if (stopped) stopped(b + "/checkpoint.safetensors");
  TrainConfig second = config(b);
  second.resume = b + "/checkpoint.safetensors";
  train(second);
  const auto full = logged_losses(a), split = logged_losses(b);
  ASSERT_EQ(full.size(), 24u);
  ASSERT_EQ(split.size(), 24u);
  for (size_t i = 0; i < full.size(); ++i) EXPECT_EQ(full[i], split[i]) << name << " step " << i;
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
}

// A model with Dropout (as Inception-v4's classifier) resumes exactly: the checkpoint keeps
// the masks drawn, so the resumed run draws the next ones instead of the first again.
TEST(Trainer, ResumeContinuesTheDropoutMasks) {
  static const bool registered = [] {
    register_model({"trainer_test_dropout", "flatten, linear, dropout, linear (a test row)", 12},
                   [](int64_t k, int64_t c, int64_t s, Rng& rng) -> LayerPtr {
                     auto net = std::make_unique<Sequential>();
                     net->add("flatten", std::make_unique<Flatten>());
                     net->add("fc1", std::make_unique<Linear>(c * s * s, 32, true, rng));
                     net->add("relu", std::make_unique<ReLU>());
                     net->add("dropout", std::make_unique<Dropout>(0.5f, 77));
                     net->add("fc2", std::make_unique<Linear>(32, k, true, rng));
                     return net;
                   });
    return true;
  }();
  ASSERT_TRUE(registered);
  expect_exact_resume(
      "drop",
      [](const std::string& out) {
        TrainConfig c = tiny_config(out);
        c.arch = "trainer_test_dropout";
        return c;
      },
      [](const std::string& checkpoint) {
        EXPECT_EQ(load_safetensors_metadata(checkpoint).at("dropout_calls"), "17");
      });
}

TEST(Trainer, ResumeReproducesTheUninterruptedRunBitForBit) {
  expect_exact_resume("plain", tiny_config);
}

// A sparsified run resumes exactly too: the checkpoint carries every rank's error-feedback
// residuals and the method's rule state (thresholds, partitions, momenta, variances),
// and the iteration count continues (rotation, dense warm-up, random streams).
class SparsifiedResume : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(SparsifiedResume, ReproducesTheUninterruptedRunBitForBit) {
  const auto [method, params] = GetParam();
  auto config = [&, method = method, params = params](const std::string& out) {
    TrainConfig c = tiny_config(out);
    c.sparsifier = method;
    c.density = 0.05;
    c.threads = 1;  // one thread each: robust on a loaded CI machine
    c.workers = 0;
    c.dense_warmup_iters = 3;
    c.first_bucket_mb = 0.002;
    c.bucket_cap_mb = 0.01;
    const std::string kv = params;
    if (!kv.empty()) c.sparsifier_params[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
    return c;
  };
  const std::string a = fresh_dir(std::string("sp_full_") + method),
                    b = fresh_dir(std::string("sp_split_") + method);
  train(config(a));
  TrainConfig first = config(b);
  first.max_iters = 17;
  train(first);
  TrainConfig second = config(b);
  second.resume = b + "/checkpoint.safetensors";
  train(second);
  const auto full = logged_losses(a), split = logged_losses(b);
  ASSERT_EQ(full.size(), 24u);
  ASSERT_EQ(split.size(), 24u);
  for (size_t i = 0; i < full.size(); ++i)
    EXPECT_EQ(full[i], split[i]) << method << " iteration " << i;

  // The state belongs to its method and its bucket plan.
  TrainConfig other = config(b);
  other.resume = b + "/checkpoint.safetensors";
  other.sparsifier = std::string(method) == "topk" ? "micro" : "topk";
  other.sparsifier_params.clear();
  other.epochs += 1;  // something left to train: the state is what is refused
  try {
    train(other);
    FAIL() << "resuming " << method << "'s state into " << other.sparsifier << " must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the checkpoint holds the state of --sparsifier"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
}

INSTANTIATE_TEST_SUITE_P(
    Methods, SparsifiedResume,
    ::testing::Values(std::make_pair("micro", ""), std::make_pair("exdyna", "blocks=64"),
                      std::make_pair("topk", ""), std::make_pair("randomk", ""),
                      std::make_pair("dgc", "momentum=0.9"), std::make_pair("sidco-e", ""),
                      std::make_pair("sage", ""), std::make_pair("vgc", "batch=32"),
                      std::make_pair("qsgd", ""), std::make_pair("powersgd", ""),
                      std::make_pair("signsgd", "")),
    [](const auto& info) {
      std::string n = info.param.first;
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

TEST(Trainer, DenseCheckpointContinuesSparsifiedFromZeroResiduals) {
  const std::string dir = fresh_dir("dense_then_sparse");
  TrainConfig c = tiny_config(dir);
  c.max_iters = 3;
  train(c);
  TrainConfig s = tiny_config(dir);
  s.resume = dir + "/checkpoint.safetensors";
  s.sparsifier = "micro";
  s.density = 0.05;
  s.max_iters = 6;
  EXPECT_EQ(train(s).steps, 6);
  // ... and its checkpoint now carries MiCRO's state.
  EXPECT_NE(load_safetensors(dir + "/checkpoint.safetensors").find("sparsify.state"), nullptr);
  std::filesystem::remove_all(dir);
}

TEST(Trainer, NanLossStopsWithIterationAndKeepsCheckpoint) {
  const std::string dir = fresh_dir("nan");
  TrainConfig c = tiny_config(dir);
  c.checkpoint_every = 2;
  c.lr = 1e12f;
  c.momentum = 0.0f;
  try {
    train(c);
    FAIL() << "a diverging run must stop";
  } catch (const Error& e) {
    const std::string msg = e.what();
    // A NaN loss names its iteration; NaN weights after a finite loss, their step.
    EXPECT_TRUE(msg.find("at iteration") != std::string::npos ||
                msg.find("after step") != std::string::npos)
        << msg;
    EXPECT_NE(msg.find("checkpoint"), std::string::npos) << msg;
  }
  // Whatever checkpoint was written before the NaN still loads.
  if (std::filesystem::exists(dir + "/checkpoint.safetensors")) {
    EXPECT_NO_THROW(load_safetensors(dir + "/checkpoint.safetensors"));
  }
  std::filesystem::remove_all(dir);
}

// An update that turns the weights NaN after a finite loss: the run stops at the next
// checkpoint instead of saving it, and the checkpoint the stop names (the last one
// written) holds finite tensors and evaluates to finite numbers.
TEST(Trainer, NanStopNamesACheckpointThatEvaluatesToFiniteNumbers) {
  const std::string dir = fresh_dir("nan_finite");
  const std::string path = dir + "/checkpoint.safetensors";
  TrainConfig c = tiny_config(dir);
  c.checkpoint_every = 1;
  c.lr = 1e30f;
  c.schedule = "constant";
  c.warmup_epochs = 0;
  std::string msg;
  try {
    train(c);
  } catch (const Error& e) {
    msg = e.what();
  }
  ASSERT_NE(msg.find("The last good checkpoint is " + path), std::string::npos) << msg;
  const TensorFile f = load_safetensors(path);
  EXPECT_EQ(first_non_finite(f.tensors), "") << "the named checkpoint holds NaN or inf";
  auto comm = make_communicator("local");
  const EvalResult r = evaluate_checkpoint(c, path, *comm);
  EXPECT_TRUE(std::isfinite(r.loss)) << r.loss;
  EXPECT_TRUE(std::isfinite(r.accuracy)) << r.accuracy;
  std::filesystem::remove_all(dir);
}

TEST(Trainer, UnknownArchListsValidOnes) {
  TrainConfig c = tiny_config(fresh_dir("arch"));
  c.arch = "resnet7";
  try {
    train(c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("resnet20"), std::string::npos) << e.what();
  }
}

TEST(Trainer, MissingDataFolderNamesExpectedFiles) {
  TrainConfig c = tiny_config(fresh_dir("missing"));
  c.dataset = "fashion-mnist";
  c.data_dir = "/nonexistent/fmnist";
  try {
    train(c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/fmnist"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ubyte.gz"), std::string::npos) << e.what();
  }
}

// Smoke test of the whole loop: the small CNN reaches at least 80% on Fashion-MNIST in under a
// minute (a subset of the training set, the full test set).
TEST(Trainer, SmallCnnLearnsFashionMnistSubset) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)";
  TrainConfig c;
  c.arch = "small_cnn";
  c.dataset = "fashion-mnist";
  c.train_subset = 12800;
  c.epochs = 1;
  c.batch_size = 64;
  c.lr = 0.02f;
  c.schedule = "constant";
  c.augment = false;  // one short pass: augmentation only slows early progress
  c.out = fresh_dir("smoke");
  c.quiet = true;
  TrainResult r = train(c);
  EXPECT_GE(r.last_eval.accuracy, 80.0);
  EXPECT_EQ(r.last_eval.examples, 10000);
  EXPECT_LT(r.seconds, 60.0);
  std::filesystem::remove_all(c.out);
}

}  // namespace
}  // namespace st::test

namespace st::test {
namespace {

// Damaged metadata of a checkpoint: the error names the file and the key, not `stoll`.
TEST(Checkpoint, BadNumericMetadataNamesTheKeyAndTheFile) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("st_bad_meta_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  TensorFile f;
  f.tensors.emplace_back("w", Tensor::zeros({2}));
  f.metadata = {{"epoch", "abc"}, {"batch", "0"}, {"step", "0"}};
  save_safetensors(path, f);
  Sequential empty;
  try {
    load_checkpoint(path, empty, nullptr);
    FAIL() << "metadata epoch=abc must be refused";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path + ": checkpoint metadata 'epoch' is 'abc', expected an integer"),
              std::string::npos)
        << msg;
  }
  f.metadata.erase("epoch");
  save_safetensors(path, f);
  try {
    load_checkpoint(path, empty, nullptr);
    FAIL() << "missing epoch must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lacks 'epoch'"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace st::test
