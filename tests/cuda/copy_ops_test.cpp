// Host <-> device copies, device-generic ops and streams/events on a real GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/cuda/stream.h"
#include "core/ops.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

const Device kGpu = Device::cuda(0);

TEST(CudaCopy, FloatRoundTripHostDeviceDeviceHost) {
  ST_REQUIRE_CUDA_DEVICE();
  Rng rng(1);
  for (int64_t n : {1, 7, 1000, 1 << 20}) {
    Tensor host = random_tensor({n}, rng);
    Tensor d1 = host.to(kGpu);
    Tensor d2 = d1.clone();  // device to device
    EXPECT_FALSE(d2.shares_storage(d1));
    EXPECT_TRUE(d2.device().is_cuda());
    EXPECT_EQ(d2.to_vector(), host.to_vector()) << n;
  }
}

TEST(CudaCopy, IntegerTensorsAndViews) {
  ST_REQUIRE_CUDA_DEVICE();
  std::vector<int32_t> v(100);
  for (int i = 0; i < 100; ++i) v[i] = i * 7 - 300;
  Tensor host = Tensor::from_vector_i32(v, {10, 10});
  Tensor back = host.to(kGpu).to(Device::cpu());
  EXPECT_EQ(std::vector<int32_t>(back.data<int32_t>(), back.data<int32_t>() + 100), v);

  Tensor flat = Tensor::zeros({10}, DType::F32, kGpu);
  Tensor view = flat.slice_flat(4, {3});
  view.fill(2.5f);
  const std::vector<float> all = flat.to_vector();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(all[i], (i >= 4 && i < 7) ? 2.5f : 0.0f) << i;

  Tensor big = Tensor::zeros({3}, DType::I64, kGpu);
  Tensor big_host = big.to(Device::cpu());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(big_host.data<int64_t>()[i], 0);
}

TEST(CudaCopy, ZeroClearsDeviceMemory) {
  ST_REQUIRE_CUDA_DEVICE();
  Tensor t = Tensor::full({257}, 3.0f, kGpu);
  t.zero();
  for (float x : t.to_vector()) EXPECT_EQ(x, 0.0f);
}

TEST(CudaOps, AddScaleSumSquaresMatchCpu) {
  ST_REQUIRE_CUDA_DEVICE();
  Rng rng(2);
  Tensor a = random_tensor({100003}, rng), b = random_tensor({100003}, rng);
  Tensor ga = a.to(kGpu), gb = b.to(kGpu);
  add_inplace(a, b);
  add_inplace(ga, gb);
  scale_inplace(a, 0.37f);
  scale_inplace(ga, 0.37f);
  EXPECT_EQ(ga.to_vector(), a.to_vector());  // same float ops, same order per element
  const double cpu = sum_squares(a), gpu = sum_squares(ga);
  EXPECT_NEAR(gpu, cpu, 1e-9 * cpu);
  EXPECT_EQ(sum_squares(Tensor::zeros({0}, DType::F32, kGpu)), 0.0);
}

// Queued on the current stream without a host wait; what follows on that stream sees it.
TEST(CudaOps, CopyAsyncOnTheStream) {
  ST_REQUIRE_CUDA_DEVICE();
  Rng rng(4);
  const Tensor a = random_tensor({4099}, rng);
  const Tensor ga = a.to(kGpu);
  Tensor gb = Tensor::empty({4099}, DType::F32, kGpu);
  copy_async(gb, ga);
  scale_inplace(gb, 2.0f);
  std::vector<float> want = a.to_vector();
  for (float& v : want) v *= 2.0f;
  EXPECT_EQ(gb.to_vector(), want);
  Tensor host = Tensor::empty({4099});
  EXPECT_THROW(copy_async(host, ga), Error);  // devices differ
}

// The gradient-norm form: many tensors, one wait; the same sum as the CPU's, tensor by tensor.
TEST(CudaOps, SumSquaresOverManyTensorsMatchesCpu) {
  ST_REQUIRE_CUDA_DEVICE();
  Rng rng(3);
  std::vector<Tensor> host, device;
  for (int64_t n : {1, 0, 513, 70001, 7}) {
    host.push_back(random_tensor({n}, rng));
    device.push_back(host.back().to(kGpu));
  }
  const double cpu = sum_squares(host), gpu = sum_squares(device);
  EXPECT_GT(cpu, 0.0);
  EXPECT_NEAR(gpu, cpu, 1e-9 * cpu);
  EXPECT_EQ(sum_squares(std::vector<Tensor>{}), 0.0);
  device.push_back(Tensor::zeros({2}));  // a host tensor among device ones
  EXPECT_THROW(sum_squares(device), Error);
}

TEST(CudaStream, EventOrdersStreamsAndTimes) {
  ST_REQUIRE_CUDA_DEVICE();
  cuda::Stream side(0);
  cuda::Event start(0, /*timing=*/true), done(0, /*timing=*/true);
  Tensor x = Tensor::full({1 << 20}, 1.0f, kGpu);
  start.record(cuda::current_stream(0));
  scale_inplace(x, 2.0f);  // on the thread's current stream
  done.record(cuda::current_stream(0));
  side.wait(done);
  {
    cuda::StreamGuard on_side(side);
    EXPECT_EQ(cuda::current_stream(0), side.get());
    scale_inplace(x, 3.0f);  // ordered after the first scale by the event
  }
  EXPECT_NE(cuda::current_stream(0), side.get());
  side.synchronize();
  EXPECT_TRUE(side.ready());
  EXPECT_TRUE(done.ready());
  EXPECT_GE(start.elapsed_ms(done), 0.0f);
  for (float v : x.to_vector()) ASSERT_EQ(v, 6.0f);
}

TEST(CudaStream, ContextHandlesFollowCurrentStream) {
  ST_REQUIRE_CUDA_DEVICE();
  cuda::Context& ctx = cuda::context(0);
  cudnnHandle_t h = ctx.cudnn();
  cudaStream_t bound = nullptr;
  ASSERT_EQ(cudnnGetStream(h, &bound), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(bound, ctx.default_stream().get());
  cuda::Stream side(0);
  cuda::StreamGuard guard(side);
  ASSERT_EQ(cudnnGetStream(ctx.cudnn(), &bound), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(bound, side.get());
  cublasHandle_t b = ctx.cublas();
  ASSERT_EQ(cublasGetStream(b, &bound), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(bound, side.get());
}

TEST(CudaStream, EachThreadHasItsOwnContext) {
  ST_REQUIRE_CUDA_DEVICE();
  cudaStream_t mine = cuda::current_stream(0), theirs = nullptr;
  std::thread other([&theirs] { theirs = cuda::current_stream(0); });
  other.join();
  EXPECT_NE(mine, theirs);
  EXPECT_EQ(cuda::current_stream(0), mine);  // stable within a thread
}

}  // namespace
}  // namespace st::test
