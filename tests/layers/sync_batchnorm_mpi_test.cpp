// Synchronised BatchNorm under mpirun: each rank holds its slice of one batch; with the
// statistics summed over the ranks, forward output, running statistics and dx equal a
// single process's on the whole batch, and the ranks' parameter gradients sum to its.
#include <gtest/gtest.h>

#include <memory>

#include "comm/communicator.h"
#include "core/rng.h"
#include "layers/batchnorm2d.h"
#include "tests/comm/mpi_test_run.h"

namespace st::test {
namespace {

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = rng.normal() * 2.0f + 0.5f;
  return t;
}

// Rows [r n, (r + 1) n) of a [P n, C, H, W] tensor.
Tensor rank_slice(const Tensor& all, int rank, int64_t n) {
  const Shape one{n, all.dim(1), all.dim(2), all.dim(3)};
  return all.slice_flat(rank * one.numel(), one).clone();
}

void expect_close(const Tensor& got, const Tensor& want, float tol, const char* what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_NEAR(got.f32()[i], want.f32()[i], tol * (1.0f + std::abs(want.f32()[i])))
        << what << " at " << i << " on rank " << world().rank();
}

TEST(SyncBatchNorm, EqualsOneProcessOverTheCombinedBatch) {
  Communicator& comm = world();
  const int P = comm.size(), r = comm.rank();
  const int64_t n = 3, C = 4, H = 5, W = 3;
  const Tensor x = random_tensor({P * n, C, H, W}, 11);
  const Tensor dy = random_tensor({P * n, C, H, W}, 12);

  BatchNorm2d whole(C);
  whole.weight().value.copy_from(random_tensor({1, C, 1, 1}, 13).reshape({C}));
  whole.weight().grad = Tensor::zeros({C});
  whole.bias().grad = Tensor::zeros({C});
  const Tensor y_whole = whole.forward(x);
  const Tensor dx_whole = whole.backward(dy);

  BatchNorm2d part(C);
  part.weight().value.copy_from(whole.weight().value);
  part.weight().grad = Tensor::zeros({C});
  part.bias().grad = Tensor::zeros({C});
  part.set_stat_sync([&comm](Tensor& t) { comm.allreduce_async(t).wait(); });
  const Tensor y = part.forward(rank_slice(x, r, n));
  const Tensor dx = part.backward(rank_slice(dy, r, n));

  expect_close(y, rank_slice(y_whole, r, n), 1e-4f, "forward output");
  expect_close(part.running_mean(), whole.running_mean(), 1e-5f, "running mean");
  expect_close(part.running_var(), whole.running_var(), 1e-5f, "running variance");
  expect_close(dx, rank_slice(dx_whole, r, n), 1e-4f, "dx");
  Tensor dgamma = part.weight().grad.clone(), dbeta = part.bias().grad.clone();
  comm.allreduce(dgamma);
  comm.allreduce(dbeta);
  expect_close(dgamma, whole.weight().grad, 1e-4f, "sum of the ranks' weight gradients");
  expect_close(dbeta, whole.bias().grad, 1e-4f, "sum of the ranks' bias gradients");

  // Without synchronisation a rank's statistics are its slice's: the output differs.
  if (P > 1) {
    BatchNorm2d local(C);
    local.weight().value.copy_from(whole.weight().value);
    const Tensor y_local = local.forward(rank_slice(x, r, n));
    double diff = 0;
    const Tensor want = rank_slice(y_whole, r, n);
    for (int64_t i = 0; i < y_local.numel(); ++i)
      diff = std::max(diff, static_cast<double>(std::abs(y_local.f32()[i] - want.f32()[i])));
    EXPECT_GT(diff, 1e-2);
  }
}

}  // namespace
}  // namespace st::test
