// The language-model training loop: it learns a small synthetic language, resumes bit for
// bit from a mid-epoch checkpoint (carried LSTM state, dropout RNG, plateau LR), trains
// tied and sparsified, evaluates its checkpoint, and names missing files.
#include "train/lm_trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "comm/communicator.h"
#include "core/device.h"
#include "core/error.h"
#include "core/safetensors.h"

namespace st::test {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  auto p = fs::temp_directory_path() / ("st_lm_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p.string();
}

// A small language with structure an LSTM picks up quickly: "subject verb object ." with
// agreement between subject and verb, and numbers counting up.
std::string corpus_dir() {
  static const std::string dir = [] {
    const std::string d = fresh_dir("corpus");
    fs::create_directories(d);
    const char* subjects[] = {"the cat", "a dog", "the birds", "some people", "my friend"};
    const char* verbs_s[] = {"eats", "sees", "likes"};
    const char* verbs_p[] = {"eat", "see", "like"};
    const char* objects[] = {"the fish", "a ball", "the sun", "bread", "music"};
    auto split = [&](const std::string& name, int lines, int seed) {
      std::ofstream out(fs::path(d) / name);
      uint32_t x = static_cast<uint32_t>(seed);
      auto next = [&](uint32_t n) {
        x = x * 1664525u + 1013904223u;
        return (x >> 16) % n;
      };
      for (int i = 0; i < lines; ++i) {
        const uint32_t s = next(5);
        const bool plural = s == 2 || s == 3;
        out << subjects[s] << ' ' << (plural ? verbs_p : verbs_s)[next(3)] << ' '
            << objects[next(5)] << " . " << (i % 7) << '\n';
      }
    };
    split("train.txt", 900, 1);
    split("valid.txt", 120, 2);
    split("test.txt", 120, 3);
    return d;
  }();
  return dir;
}

TrainConfig lm_config(const std::string& out) {
  TrainConfig c;
  c.arch = "lstm";
  c.dataset = "text";
  c.data_dir = corpus_dir();
  c.batch_size = 4;
  c.epochs = 2;
  c.lr = 5.0f;
  c.momentum = 0.0f;
  c.weight_decay = 0.0f;
  c.clip = 0.5f;
  c.schedule = "plateau";
  c.threads = 2;
  c.out = out;
  c.quiet = true;
  return c;
}

LmOptions small_lm() {
  LmOptions lm;
  lm.layers = 2;
  lm.hidden = 24;
  lm.emsize = 24;
  lm.bptt = 12;
  lm.dropout = 0.2f;
  return lm;
}

std::vector<std::string> column(const std::string& file, const std::string& name) {
  std::ifstream in(file);
  std::string line, cell;
  std::getline(in, line);
  std::stringstream header(line);
  int index = -1;
  for (int i = 0; std::getline(header, cell, ','); ++i)
    if (cell == name) index = i;
  EXPECT_GE(index, 0) << name << " not in " << file;
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    for (int i = 0; i <= index && std::getline(ss, cell, ','); ++i) {
    }
    out.push_back(cell);
  }
  return out;
}

TEST(LmTrainer, LearnsTheLanguageAndReportsPerplexity) {
  const std::string out = fresh_dir("learn");
  auto comm = make_communicator("local");
  const LmResult r = train_lm(lm_config(out), small_lm(), *comm);
  // About 60 words: a model that learned nothing sits near 60; the grammar allows ~5.
  EXPECT_LT(r.valid_ppl, 15.0);
  EXPECT_LT(r.test_ppl, 15.0);
  EXPECT_GT(r.valid_ppl, 1.0);
  const auto ppl = column(out + "/epochs.csv", "valid_ppl");
  ASSERT_EQ(ppl.size(), 2u);
  EXPECT_NEAR(std::stod(ppl[1]), r.valid_ppl, 1e-3 * r.valid_ppl);
  EXPECT_FALSE(column(out + "/iterations.csv", "ppl").empty());
  // The checkpoint evaluates to the same test perplexity.
  TrainConfig ec;
  ec.dataset.clear();
  ec.threads = 2;
  const LmResult e = evaluate_lm_checkpoint(ec, out + "/checkpoint.safetensors", *comm);
  EXPECT_NEAR(e.test_ppl, r.test_ppl, 1e-4 * r.test_ppl);
  EXPECT_TRUE(is_lm_checkpoint(out + "/checkpoint.safetensors"));
  // PyTorch RNNModel names.
  const TensorFile f = load_safetensors(out + "/checkpoint.safetensors");
  for (const char* name :
       {"encoder.weight", "rnn.weight_ih_l0", "rnn.bias_hh_l1", "decoder.weight", "decoder.bias"})
    EXPECT_NE(f.find(name), nullptr) << name;
  fs::remove_all(out);
}

TEST(LmTrainer, ResumeMidEpochReproducesTheUninterruptedRunBitForBit) {
  auto comm = make_communicator("local");
  const std::string a = fresh_dir("full"), b = fresh_dir("split");
  TrainConfig full = lm_config(a);
  full.lr = 20.0f;  // large enough that the plateau rule divides it after epoch 1
  train_lm(full, small_lm(), *comm);
  TrainConfig first = lm_config(b);
  first.lr = full.lr;
  const auto steps = column(a + "/iterations.csv", "loss").size();
  first.max_iters = static_cast<int64_t>(steps * 3 / 4);  // stop inside epoch 2
  train_lm(first, small_lm(), *comm);
  TrainConfig second = first;
  second.max_iters = 0;
  second.resume = b + "/checkpoint.safetensors";
  train_lm(second, small_lm(), *comm);
  const auto la = column(a + "/iterations.csv", "loss"), lb = column(b + "/iterations.csv", "loss");
  ASSERT_EQ(la.size(), lb.size());
  for (size_t i = 0; i < la.size(); ++i) EXPECT_EQ(la[i], lb[i]) << "iteration " << i;
  EXPECT_EQ(column(a + "/epochs.csv", "valid_ppl").back(),
            column(b + "/epochs.csv", "valid_ppl").back());
  fs::remove_all(a);
  fs::remove_all(b);
}

// Tied weights through the reducer (which rejects a second gradient-ready announcement)
// and a sparsifier hook, on one rank.
TEST(LmTrainer, TiedAndSparsifiedTrain) {
  auto comm = make_communicator("local");
  const std::string out = fresh_dir("tied");
  TrainConfig c = lm_config(out);
  c.epochs = 1;
  c.sparsifier = "topk";
  c.density = 0.1;
  c.bucket_cap_mb = 0.01;  // several buckets
  c.first_bucket_mb = 0.001;
  LmOptions lm = small_lm();
  lm.tied = true;
  const LmResult r = train_lm(c, lm, *comm);
  EXPECT_TRUE(std::isfinite(r.valid_ppl));
  EXPECT_LT(r.valid_ppl, 60.0);
  EXPECT_FALSE(column(out + "/iterations.csv", "sp_density").empty());
  const TensorFile f = load_safetensors(out + "/checkpoint.safetensors");
  EXPECT_EQ(f.find("decoder.weight"), nullptr);  // one shared matrix: encoder.weight
  fs::remove_all(out);
}

// Variance-based compression needs per-sample squared gradients of every weight matrix;
// the embedding and the LSTM do not provide them, so the run is refused before the first
// step (never trained on VGC's g^2 / B fallback without a word).
TEST(LmTrainer, VgcIsRefusedAtStartWithoutPerSampleSquares) {
  auto comm = make_communicator("local");
  const std::string out = fresh_dir("vgc");
  TrainConfig c = lm_config(out);
  c.sparsifier = "vgc";
  try {
    train_lm(c, small_lm(), *comm);
    FAIL() << "--sparsifier vgc with the LSTM must be refused";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--sparsifier vgc needs per-sample squared gradients"), std::string::npos)
        << msg;
    // The embedding provides them; the first parameter without them is the LSTM's.
    EXPECT_NE(msg.find("rnn.weight_ih_l0"), std::string::npos) << msg;
  }
  EXPECT_FALSE(fs::exists(out + "/iterations.csv"));
  fs::remove_all(out);
}

TEST(LmTrainer, MissingCorpusFilesAreNamed) {
  auto comm = make_communicator("local");
  const std::string dir = fresh_dir("missing_data");
  fs::create_directories(dir);
  std::ofstream(fs::path(dir) / "ptb.train.txt") << "a b c\n";
  TrainConfig c = lm_config(fresh_dir("missing_out"));
  c.dataset = "ptb";
  c.data_dir = dir;
  try {
    train_lm(c, small_lm(), *comm);
    FAIL() << "missing valid/test splits must throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("ptb.valid.txt"), std::string::npos) << msg;
    EXPECT_NE(msg.find(dir), std::string::npos) << msg;
  }
  c.dataset = "mnist";
  EXPECT_THROW(train_lm(c, small_lm(), *comm), Error);
  fs::remove_all(dir);
}

// --device cuda is the device's business, as for the image models: without one, both
// training and checkpoint evaluation stop with the device error, not an LSTM refusal.
TEST(LmTrainer, WithoutADeviceStopsWithTheDeviceLine) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device exists (lstm_lm_cuda_test runs)";
  auto comm = make_communicator("local");
  TrainConfig c = lm_config(fresh_dir("cuda_out"));
  c.device = "cuda";
  const std::string expected = cuda_built()
                                   ? "--device cuda: no CUDA device visible"
                                   : "--device cuda: this sparsetrain was built without CUDA";
  auto expect_device_error = [&](const std::function<void()>& run, const char* what) {
    try {
      run();
      ADD_FAILURE() << what << " did not stop";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(expected), std::string::npos) << what << ": " << msg;
      EXPECT_EQ(msg.find("runs on the CPU"), std::string::npos) << what << ": " << msg;
    }
  };
  expect_device_error([&] { train_lm(c, small_lm(), *comm); }, "training");
  // A checkpoint from a CPU run, evaluated on the missing GPU.
  TrainConfig cpu = lm_config(fresh_dir("cuda_ckpt"));
  cpu.epochs = 1;
  cpu.max_iters = 2;
  train_lm(cpu, small_lm(), *comm);
  expect_device_error(
      [&] { evaluate_lm_checkpoint(c, cpu.out + "/checkpoint.safetensors", *comm); }, "evaluation");
}

}  // namespace
}  // namespace st::test
