// GPU-vs-CPU for the language model: the Embedding kernels (gather, and the sorted
// scatter-add, which must equal the CPU bit for bit), the tied decoder, a whole training
// step of the model (loss, gradients, the clipped norm, the SGD update, carried state),
// and `train_lm --device cuda` against the same run on the CPU, whose checkpoint the CPU
// evaluates. Every test skips without a device (SPARSETRAIN_REQUIRE_GPU=1: fails).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "comm/communicator.h"
#include "core/safetensors.h"
#include "layers/embedding.h"
#include "layers/flat_params.h"
#include "layers/linear.h"
#include "models/lstm_lm.h"
#include "optim/clip.h"
#include "optim/make_optimizer.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/gradcheck.h"
#include "train/lm_trainer.h"

namespace st::test {
namespace {

namespace fs = std::filesystem;

const Device kGpu = Device::cuda(0);

void expect_close(const Tensor& cpu, const Tensor& gpu, double tol, const std::string& what) {
  ASSERT_EQ(cpu.shape(), gpu.shape()) << what;
  ASSERT_TRUE(gpu.device().is_cuda()) << what << " is on " << gpu.device().str();
  const std::vector<float> a = cpu.to_vector(), b = gpu.to_vector();
  int reported = 0;
  for (size_t i = 0; i < a.size() && reported < 5; ++i)
    if (std::abs(a[i] - b[i]) > tol * (1.0 + std::abs(a[i]))) {
      ADD_FAILURE() << what << " element " << i << ": cpu " << a[i] << " gpu " << b[i];
      ++reported;
    }
}

// Token ids [T, B] with many repeats (the scatter-add's hard case) and every id used.
Tensor token_ids(int64_t steps, int64_t batch, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> ids(steps * batch);
  uint32_t x = seed;
  for (size_t i = 0; i < ids.size(); ++i) {
    x = x * 1664525u + 1013904223u;
    ids[i] = static_cast<int32_t>(i < static_cast<size_t>(vocab) ? i : (x >> 16) % 5);
  }
  return Tensor::from_vector_i32(ids, Shape{steps, batch});
}

TEST(CudaVsCpu, EmbeddingGatherAndScatterAddAreBitIdentical) {
  ST_REQUIRE_CUDA_DEVICE();
  Rng a(7), b(7), data(8);
  Embedding cpu(37, 9, a), gpu(37, 9, b);
  gpu.to(kGpu);
  Param &pc = cpu.weight(), &pg = gpu.weight();
  const Tensor g0 = random_tensor(pc.grad.shape(), data, 0.5f);
  pc.grad.copy_from(g0);
  pg.grad.copy_from(g0);  // backward accumulates into what is there
  int ready = 0;
  pg.on_grad_ready = [&ready](Param&) { ++ready; };
  for (int step = 0; step < 2; ++step) {
    const Tensor ids = token_ids(11, 6, 37, 3 + step);
    const Tensor yc = cpu.forward(ids), yg = gpu.forward(ids.to(kGpu));
    ASSERT_EQ(yc.shape(), (Shape{11, 6, 9}));
    EXPECT_EQ(yc.to_vector(), yg.to_vector()) << "forward, step " << step;
    const Tensor dy = random_tensor(yc.shape(), data);
    EXPECT_FALSE(gpu.backward(dy.to(kGpu)).defined());  // ids have no gradient
    cpu.backward(dy);
    // The same additions in the same order per row: equal, not just close.
    EXPECT_EQ(pc.grad.to_vector(), pg.grad.to_vector()) << "weight gradient, step " << step;
    EXPECT_EQ(ready, step + 1);
  }
}

TEST(CudaErrors, EmbeddingNamesTheBadTokenAndPosition) {
  ST_REQUIRE_CUDA_DEVICE();
  Rng rng(1);
  Embedding e(10, 4, rng);
  e.to(kGpu);
  const Tensor ids = Tensor::from_vector_i32({1, 2, 10, 3}, Shape{2, 2}).to(kGpu);
  try {
    e.forward(ids);
    FAIL() << "no error for token id 10 of a 10-row table";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("token id 10 at position 2"), std::string::npos)
        << err.what();
  }
}

// The tied decoder multiplies by the embedding matrix on cuBLAS; it adds its share of dE
// but leaves the announcement to the embedding.
TEST(CudaVsCpu, TiedLinearAddsItsShareWithoutAnnouncing) {
  ST_REQUIRE_CUDA_DEVICE();
  Rng a(4), b(4), data(5);
  Embedding ec(13, 6, a), eg(13, 6, b);
  eg.to(kGpu);
  Linear dc(ec.weight(), true), dg(eg.weight(), true);
  dg.to(kGpu);
  EXPECT_EQ(collect_params(dg).size(), 1u);  // only the bias is its own
  int announced = 0;
  eg.weight().on_grad_ready = [&announced](Param&) { ++announced; };
  const Tensor x = random_tensor({7, 6}, data), dy = random_tensor({7, 13}, data);
  expect_close(dc.forward(x), dg.forward(x.to(kGpu)), 1e-5, "logits");
  expect_close(dc.backward(dy), dg.backward(dy.to(kGpu)), 1e-5, "dx");
  expect_close(ec.weight().grad, eg.weight().grad, 1e-5, "dE");
  expect_close(collect_params(dc)[0]->grad, collect_params(dg)[0]->grad, 1e-5, "db");
  EXPECT_EQ(announced, 0);
}

// One training step as the loop runs it (flat buffers, loss, backward, local clip, SGD),
// then a second window from the carried state.
void lm_step_matches(bool tied) {
  LstmLmConfig cfg;
  cfg.vocab = 41;
  cfg.emsize = cfg.hidden = 16;
  cfg.layers = 2;
  cfg.dropout = 0.3f;
  cfg.tied = tied;
  cfg.seed = 3;
  Rng a(9), b(9);
  LstmLm cpu(cfg, a), gpu(cfg, b);
  FlatParams fc(cpu, Device::cpu()), fg(gpu, kGpu);
  OptimizerOptions o;
  o.lr = 0.5f;
  auto sgd_c = make_optimizer("sgd", fc.params(), o), sgd_g = make_optimizer("sgd", fg.params(), o);
  LmCrossEntropy cec, ceg;
  for (int window = 0; window < 2; ++window) {
    const std::string at =
        std::string(tied ? "tied" : "untied") + " window " + std::to_string(window) + ": ";
    const Tensor ids = token_ids(7, 4, cfg.vocab, 11 + window);
    const Tensor targets = token_ids(7, 4, cfg.vocab, 21 + window).reshape(Shape{28});
    Tensor lc = cpu.forward(ids), lg = gpu.forward(ids.to(kGpu));
    const float loss_c = cec.forward(lc, targets), loss_g = ceg.forward(lg, targets.to(kGpu));
    EXPECT_NEAR(loss_c, loss_g, 1e-4 * loss_c) << at << "loss";
    fc.zero_grads();
    fg.zero_grads();
    cpu.backward(cec.backward());
    gpu.backward(ceg.backward());
    for (size_t i = 0; i < fc.params().size(); ++i)
      expect_close(fc.params()[i]->grad, fg.params()[i]->grad, 2e-3,
                   at + fc.params()[i]->name + " gradient");
    const double nc = clip_grad_norm(fc.params(), 0.25), ng = clip_grad_norm(fg.params(), 0.25);
    EXPECT_NEAR(nc, ng, 1e-3 * nc) << at << "gradient norm";
    sgd_c->step();
    sgd_g->step();
    expect_close(fc.values(), fg.values(), 1e-3, at + "parameters after SGD");
    expect_close(cpu.rnn().final_h(), gpu.rnn().final_h(), 1e-3, at + "carried h");
    cpu.detach_state();
    gpu.detach_state();
  }
}

TEST(CudaVsCpu, LstmLmTrainingStepUntied) {
  ST_REQUIRE_CUDA_DEVICE();
  lm_step_matches(false);
}

TEST(CudaVsCpu, LstmLmTrainingStepTied) {
  ST_REQUIRE_CUDA_DEVICE();
  lm_step_matches(true);
}

std::string corpus_dir() {
  const fs::path d = fs::temp_directory_path() / ("st_lm_cuda_" + std::to_string(::getpid()));
  fs::create_directories(d);
  const char* words[] = {"the", "cat", "sees", "a", "dog", "runs", "far", "."};
  for (const char* split : {"train.txt", "valid.txt", "test.txt"}) {
    std::ofstream out(d / split);
    for (int line = 0; line < 60; ++line) {
      for (int w = 0; w < 6; ++w) out << words[(line * 3 + w * (line % 4 + 1)) % 8] << ' ';
      out << '\n';
    }
  }
  return d.string();
}

std::vector<double> losses(const std::string& out) {
  std::ifstream in(out + "/iterations.csv");
  std::string line;
  std::getline(in, line);  // header: epoch,iter,step,loss,...
  std::vector<double> v;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string cell;
    for (int i = 0; i < 4; ++i) std::getline(ss, cell, ',');
    v.push_back(std::stod(cell));
  }
  return v;
}

// The whole task on the device: the loss curve follows the CPU's, and the checkpoint (the
// same format: host tensors) evaluates on the CPU to the device's test perplexity.
TEST(LmTrainerCuda, TrainsLikeTheCpuAndItsCheckpointEvaluatesOnTheCpu) {
  ST_REQUIRE_CUDA_DEVICE();
  auto comm = make_communicator("local");
  LmOptions lm;
  lm.layers = 2;
  lm.hidden = lm.emsize = 16;
  lm.bptt = 8;
  lm.tied = true;
  std::map<std::string, LmResult> result;
  for (const std::string device : {"cpu", "cuda"}) {
    TrainConfig c;
    c.arch = "lstm";
    c.dataset = "text";
    c.data_dir = corpus_dir();
    c.device = device;
    c.batch_size = 4;
    c.epochs = 1;
    c.lr = 2.0f;
    c.momentum = 0.0f;
    c.clip = 0.25f;
    c.schedule = "plateau";
    c.quiet = true;
    c.overwrite = true;
    c.out = (fs::temp_directory_path() / ("st_lm_cuda_run_" + device)).string();
    result[device] = train_lm(c, lm, *comm);
  }
  const std::string cpu_out = (fs::temp_directory_path() / "st_lm_cuda_run_cpu").string();
  const std::string gpu_out = (fs::temp_directory_path() / "st_lm_cuda_run_cuda").string();
  const std::vector<double> a = losses(cpu_out), b = losses(gpu_out);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 2e-3 * a[i]) << "step " << i;
  EXPECT_NEAR(result["cpu"].test_ppl, result["cuda"].test_ppl, 1e-2 * result["cpu"].test_ppl);
  // The device run's checkpoint holds the same tensors as the CPU run's, on the host.
  const TensorFile fc = load_safetensors(cpu_out + "/checkpoint.safetensors");
  const TensorFile fg = load_safetensors(gpu_out + "/checkpoint.safetensors");
  ASSERT_EQ(fc.tensors.size(), fg.tensors.size());
  for (const auto& [name, t] : fc.tensors) {
    const Tensor* g = fg.find(name);
    ASSERT_NE(g, nullptr) << name;
    EXPECT_EQ(g->shape(), t.shape()) << name;
  }
  TrainConfig eval;
  eval.device = "cpu";
  const LmResult r = evaluate_lm_checkpoint(eval, gpu_out + "/checkpoint.safetensors", *comm);
  EXPECT_NEAR(r.test_ppl, result["cuda"].test_ppl, 1e-3 * r.test_ppl);
}

}  // namespace
}  // namespace st::test
