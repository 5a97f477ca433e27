// NCCL's stream is ordered with nothing else: a collective's input written on the calling
// thread's current stream must be waited for on the device before NCCL reads it (the
// communicator makes its stream wait on an event recorded there). Here the caller's
// stream is held for 300 ms by a host function before it writes the input, so a
// collective that did not wait would read the old contents. An out-of-place allgather on
// one rank is a plain copy, which shows the stale read; in-place on one rank would not.
// Skips without a GPU; SPARSETRAIN_REQUIRE_GPU=1 makes that a failure.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm/communicator.h"
#include "core/cuda/stream.h"
#include "core/ops.h"
#include "tests/comm/mpi_test_run.h"
#include "tests/cuda/cuda_test_util.h"

namespace st::test {
namespace {

void CUDART_CB hold_stream(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

TEST(NcclStream, ACollectiveWaitsForWorkQueuedOnTheCallersStream) {
  ST_REQUIRE_CUDA_DEVICE();
  if (world().size() != 1) GTEST_SKIP() << "one rank (one GPU) is enough to show the ordering";
  std::unique_ptr<Communicator> nccl = make_communicator("nccl");
  const Device gpu = process_device();
  ASSERT_TRUE(gpu.is_cuda());
  constexpr int64_t n = 1 << 20;
  Tensor in = Tensor::zeros({n}, DType::F32, gpu);
  Tensor out = Tensor::zeros({n}, DType::F32, gpu);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const cudaStream_t caller = cuda::current_stream(gpu.index);
  ASSERT_EQ(cudaLaunchHostFunc(caller, hold_stream, nullptr), cudaSuccess);
  in.fill(3.0f);  // queued on the caller's stream, behind the host function
  nccl->allgather(in, out);
  const std::vector<float> got = out.to_vector();
  int64_t stale = 0;
  for (float v : got) stale += v != 3.0f;
  EXPECT_EQ(stale, 0) << "NCCL read the input before the caller's stream wrote it";
}

}  // namespace
}  // namespace st::test
