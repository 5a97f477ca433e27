// SGD on CUDA: a grid-stride kernel around the per-element update the CPU loop runs
// (optim/sgd_update.h), so both backends follow torch.optim.SGD the same way.
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"
#include "optim/sgd.h"

namespace st::cuda {

namespace {

template <bool kMomentum, bool kNesterov, bool kFirst>
__global__ void sgd_kernel(float* p, float* buf, const float* g, int64_t n, math::SgdCoeffs c) {
  ST_GRID_STRIDE_LOOP(i, n) {
    float unused = 0.0f;
    math::sgd_update<kMomentum, kNesterov, kFirst>(p[i], kMomentum ? buf[i] : unused, g[i], c);
  }
}

template <bool kMomentum, bool kNesterov, bool kFirst>
void launch(float* p, float* buf, const float* g, int64_t n, const math::SgdCoeffs& c,
            cudaStream_t stream) {
  sgd_kernel<kMomentum, kNesterov, kFirst><<<grid_for(n), kBlock, 0, stream>>>(p, buf, g, n, c);
  ST_CUDA_CHECK_LAUNCH();
}

}  // namespace

void sgd_update(float* p, float* buf, const float* grad, int64_t n, const math::SgdCoeffs& c,
                bool momentum, bool nesterov, bool first, int device) {
  if (n == 0) return;
  DeviceGuard guard(device);
  const cudaStream_t s = current_stream(device);
  if (!momentum) {
    launch<false, false, false>(p, buf, grad, n, c, s);
  } else if (nesterov && first) {
    launch<true, true, true>(p, buf, grad, n, c, s);
  } else if (nesterov) {
    launch<true, true, false>(p, buf, grad, n, c, s);
  } else if (first) {
    launch<true, false, true>(p, buf, grad, n, c, s);
  } else {
    launch<true, false, false>(p, buf, grad, n, c, s);
  }
}

}  // namespace st::cuda
