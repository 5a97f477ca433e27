// Every sparsifier through SparsifyHook twice on the same gradients: once on CPU buckets
// (bulk::CpuOps, the MPI or Local communicator) and once on CUDA buckets (bulk::CudaOps,
// the NCCL communicator), on 1 process and under mpirun with 2 (one GPU per rank). The
// averaged update, the residual and the counts must agree: bit for bit for the methods
// whose decisions are comparisons, sorts and counts only; for the others (fitted or
// searched thresholds, quantiser scales, transforms, low rank: sums whose order differs
// between the implementations) at all but a few boundary positions. Skips without a
// device on every rank alike; SPARSETRAIN_REQUIRE_GPU=1 turns the skip into a failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "comm/communicator.h"
#include "core/rng.h"
#include "sparsify/registry.h"
#include "sparsify/sparsify_hook.h"
#include "tests/comm/mpi_test_run.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/sparsify/device_agreement.h"
#include "tests/sparsify/heavy_tailed.h"

namespace st::test {
namespace {

// Why this job cannot run the GPU half, agreed on every rank ("" when it can): a rank
// that skipped alone would leave the others waiting in a collective.
std::string gpu_skip_reason() {
  Communicator& c = world();
  std::string reason = cuda_skip_reason();
  if (reason.empty() && c.placement().local_size > cuda_device_count())
    reason = std::to_string(c.placement().local_size) + " ranks on a node with " +
             std::to_string(cuda_device_count()) + " GPUs (NCCL needs one GPU per rank)";
  const bool any = c.allreduce_scalar(reason.empty() ? 0.0 : 1.0, ReduceOp::Max) > 0;
  return any && reason.empty() ? "another rank has no usable GPU" : reason;
}

// NCCL's communicator takes this rank's local GPU; the buckets live there too.
Communicator& gpu_comm() {
  static std::unique_ptr<Communicator> comm = make_communicator("nccl");
  return *comm;
}

class CudaHook : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaHook, SameExchangeAsCpu) {
  const std::string reason = gpu_skip_reason();
  if (!reason.empty()) {
    // Too few GPUs for this many ranks is a skip even where GPUs are required: a one-GPU
    // machine runs the 1-rank case and skips the 2-rank one.
    if (gpu_required() && cuda_device_count() == 0)
      GTEST_FAIL() << "SPARSETRAIN_REQUIRE_GPU=1 but " << reason;
    GTEST_SKIP() << "skipped: " << reason;
  }
  const std::string method = GetParam();
  Communicator& c = world();
  Communicator& g = gpu_comm();
  const Device gpu = Device::cuda(local_gpu(c.placement(), cuda_device_count()));
  SparsifierOptions opt;
  opt.density = 0.01;
  opt.seed = 17;
  if (method == "vgc") opt.params = {{"batch", "1"}};  // g^2 / B fallback without side input
  SparsifyHook on_cpu(make_sparsifier(method, opt), opt), on_gpu(make_sparsifier(method, opt), opt);
  const std::vector<int64_t> sizes = {6000, 2500};  // two buckets: per-bucket state
  for (int64_t t = 0; t < 6; ++t)
    for (size_t b = 0; b < sizes.size(); ++b) {
      SCOPED_TRACE(method + " step " + std::to_string(t) + " bucket " + std::to_string(b));
      const int64_t n = sizes[b];
      Bucket bucket;
      bucket.id = static_cast<int>(b);
      bucket.numel = n;
      const Tensor grad = gradient(n, c.rank(), t, bucket.id);
      Tensor host = grad.clone(), device = grad.to(gpu);
      on_cpu.exchange(bucket, host, c, t);
      on_gpu.exchange(bucket, device, g, t);
      const std::vector<float> u_cpu = host.to_vector(), u_gpu = device.to_vector();
      const std::vector<float> r_cpu = residual_of(on_cpu, bucket.id, n),
                               r_gpu = residual_of(on_gpu, bucket.id, n);
      const std::vector<SparsifyStats> s_cpu = on_cpu.take_stats(), s_gpu = on_gpu.take_stats();
      ASSERT_EQ(s_cpu.size(), 1u);
      ASSERT_EQ(s_gpu.size(), 1u);
      if (bit_exact(method)) {
        ASSERT_EQ(u_gpu, u_cpu) << "the averaged update";
        ASSERT_EQ(r_gpu, r_cpu) << "the residual";
        EXPECT_EQ(s_gpu[0].local_count, s_cpu[0].local_count);
        EXPECT_EQ(s_gpu[0].global_count, s_cpu[0].global_count);
        EXPECT_EQ(s_gpu[0].threshold, s_cpu[0].threshold);
      } else {
        // A threshold a few ulps apart moves at most a few boundary elements.
        const int64_t allowed = 2 + n / 100;
        EXPECT_LE(differing(u_cpu, u_gpu), allowed) << "the averaged update";
        EXPECT_LE(differing(r_cpu, r_gpu), allowed) << "the residual";
        EXPECT_NEAR(s_gpu[0].global_count, s_cpu[0].global_count, allowed);
      }
    }
}

INSTANTIATE_TEST_SUITE_P(EveryMethod, CudaHook, ::testing::ValuesIn(sparsifier_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace st::test
