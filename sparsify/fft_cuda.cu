#include <cufft.h>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "sparsify/fft_cuda.h"

#define ST_CUFFT_CHECK(expr)                                                \
  do {                                                                      \
    const cufftResult st_status_ = (expr);                                  \
    if (st_status_ != CUFFT_SUCCESS)                                        \
      ::st::detail::throw_error(__FILE__, __LINE__, "cuFFT error: ", #expr, \
                                " failed: ", static_cast<int>(st_status_)); \
  } while (0)

namespace st::fft {

namespace {

__global__ void magnitude_kernel(const float* coef, int64_t ncoef, float* mag) {
  ST_GRID_STRIDE_LOOP(j, ncoef) {
    mag[j] = hypotf(coef[2 * j], coef[2 * j + 1]);
  }
}

__global__ void scale_kernel(float* x, int64_t n, float s) {
  ST_GRID_STRIDE_LOOP(i, n) {
    x[i] *= s;
  }
}

}  // namespace

CufftPlans::~CufftPlans() {
  for (auto& [len, p] : plans_) {
    cufftDestroy(p.r2c);
    cufftDestroy(p.c2r);
  }
}

CufftPlans::Plan& CufftPlans::plan(int64_t len) {
  auto it = plans_.find(len);
  if (it != plans_.end()) return it->second;
  Plan p;
  cufftHandle r2c, c2r;
  ST_CUFFT_CHECK(cufftPlan1d(&r2c, static_cast<int>(len), CUFFT_R2C, 1));
  ST_CUFFT_CHECK(cufftPlan1d(&c2r, static_cast<int>(len), CUFFT_C2R, 1));
  p.r2c = r2c;
  p.c2r = c2r;
  return plans_.emplace(len, p).first->second;
}

void CufftPlans::forward(const float* x, int64_t len, float* coef) {
  const int dev = cuda::device_of(x);
  cuda::DeviceGuard guard(dev);
  Plan& p = plan(len);
  ST_CUFFT_CHECK(cufftSetStream(p.r2c, cuda::current_stream(dev)));
  ST_CUFFT_CHECK(
      cufftExecR2C(p.r2c, const_cast<cufftReal*>(x), reinterpret_cast<cufftComplex*>(coef)));
}

void CufftPlans::magnitudes(const float* coef, int64_t ncoef, float* mag) {
  if (ncoef <= 0) return;
  const int dev = cuda::device_of(coef);
  cuda::DeviceGuard guard(dev);
  magnitude_kernel<<<cuda::grid_for(ncoef), cuda::kBlock, 0, cuda::current_stream(dev)>>>(
      coef, ncoef, mag);
  ST_CUDA_CHECK_LAUNCH();
}

void CufftPlans::inverse(const float* coef, int64_t len, float* out, float* scratch) {
  const int dev = cuda::device_of(coef);
  cuda::DeviceGuard guard(dev);
  const cudaStream_t s = cuda::current_stream(dev);
  Plan& p = plan(len);
  ST_CUDA_CHECK(cudaMemcpyAsync(scratch, coef, sizeof(float) * 2 * (len / 2 + 1),
                                cudaMemcpyDeviceToDevice, s));
  ST_CUFFT_CHECK(cufftSetStream(p.c2r, s));
  ST_CUFFT_CHECK(cufftExecC2R(p.c2r, reinterpret_cast<cufftComplex*>(scratch), out));
  scale_kernel<<<cuda::grid_for(len), cuda::kBlock, 0, s>>>(out, len,
                                                            1.0f / static_cast<float>(len));
  ST_CUDA_CHECK_LAUNCH();
}

}  // namespace st::fft
