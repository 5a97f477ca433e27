#include "sparsify/dgc_cuda.h"

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"

namespace st::dgc {

namespace {

__global__ void momentum_kernel(float m, const float* x, int64_t n, float* u, float* v,
                                float* seen) {
  ST_GRID_STRIDE_LOOP(i, n) {
    const float ui = m * u[i] + (x[i] - seen[i]);
    u[i] = ui;
    v[i] += ui;
    seen[i] = x[i];
  }
}

}  // namespace

void momentum_cuda(float m, const float* x, int64_t n, float* u, float* v, float* seen) {
  if (n <= 0) return;
  const int dev = cuda::device_of(x);
  cuda::DeviceGuard guard(dev);
  momentum_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, cuda::current_stream(dev)>>>(m, x, n, u, v,
                                                                                     seen);
  ST_CUDA_CHECK_LAUNCH();
}

}  // namespace st::dgc
