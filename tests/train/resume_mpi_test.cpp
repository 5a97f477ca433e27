// A sparsified run on P ranks resumes exactly: every rank gets back its own error-feedback
// residual and rule state (the checkpoint holds one row per rank). Runs under mpirun on
// 2 and 4 processes through ctest.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "comm/communicator.h"
#include "core/error.h"
#include "tests/comm/mpi_test_run.h"
#include "tests/train/run_files.h"
#include "train/trainer.h"

namespace st::test {
namespace {

TrainConfig config(const std::string& out, const std::string& method,
                   const std::string& hierarchy) {
  TrainConfig c;
  c.arch = "small_cnn";
  c.dataset = "synthetic";
  c.synthetic_size = 256;
  c.batch_size = 16;  // per rank
  c.epochs = 2;
  c.lr = 0.05f;
  c.workers = 0;
  c.threads = 1;
  c.out = out;
  c.quiet = true;
  c.eval_batches = 1;
  c.sparsifier = method;
  c.density = 0.05;
  c.first_bucket_mb = 0.002;
  c.bucket_cap_mb = 0.01;
  if (method == "dgc") c.sparsifier_params["momentum"] = "0.9";
  c.hierarchy = hierarchy;
  return c;
}

// An interrupted and resumed run logs the uninterrupted run's losses bit for bit.
void expect_exact_resume(const std::string& method, const std::string& hierarchy) {
  Communicator& comm = world();
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("st_resume_np" + std::to_string(comm.size()) + "_" + method))
                               .string();
  const std::string a = base + "_full", b = base + "_split";
  if (comm.rank() == 0) {
    std::filesystem::remove_all(a);
    std::filesystem::remove_all(b);
  }
  comm.allreduce_scalar(0.0);  // barrier
  train(config(a, method, hierarchy), comm);
  // Stop one step past the middle of the run (mid-epoch 2), then resume.
  const int64_t total = 2 * 256 / (16 * comm.size());
  TrainConfig first = config(b, method, hierarchy);
  first.max_iters = total / 2 + 1;
  train(first, comm);
  TrainConfig second = config(b, method, hierarchy);
  second.resume = b + "/checkpoint.safetensors";
  train(second, comm);
  if (comm.rank() == 0) {
    const auto full = logged_losses(a), split = logged_losses(b);
    ASSERT_EQ(full.size(), static_cast<size_t>(total));
    ASSERT_EQ(full.size(), split.size());
    for (size_t i = 0; i < full.size(); ++i) EXPECT_EQ(full[i], split[i]) << method << " " << i;
    std::filesystem::remove_all(a);
    std::filesystem::remove_all(b);
  }
}

class MultiRankResume : public ::testing::TestWithParam<const char*> {};

TEST_P(MultiRankResume, ReproducesTheUninterruptedRun) {
  expect_exact_resume(GetParam(), "off");
}

// Two levels (2 nodes x 2 ranks on 4 ranks): each rank's residuals are its slice's.
TEST(TwoLevelResume, ReproducesTheUninterruptedRun) {
  expect_exact_resume("micro", world().size() >= 4 ? "2" : "1");
}

INSTANTIATE_TEST_SUITE_P(Methods, MultiRankResume, ::testing::Values("micro", "exdyna", "dgc"));

}  // namespace
}  // namespace st::test
