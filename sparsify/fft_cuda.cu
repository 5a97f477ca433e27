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

void CufftPlans::rfft(const float* x, const std::vector<bulk::FftPiece>& pieces, float* coef) {
  if (pieces.empty()) return;
  const int dev = cuda::device_of(coef);
  cuda::DeviceGuard guard(dev);
  const cudaStream_t s = cuda::current_stream(dev);
  for (const bulk::FftPiece& p : pieces) {
    Plan& pl = plan(p.len);
    ST_CUFFT_CHECK(cufftSetStream(pl.r2c, s));
    ST_CUFFT_CHECK(cufftExecR2C(pl.r2c, const_cast<cufftReal*>(x + p.begin),
                                reinterpret_cast<cufftComplex*>(coef + p.coef)));
  }
}

void CufftPlans::irfft(const float* coef, const std::vector<bulk::FftPiece>& pieces, float* out,
                       float* scratch) {
  if (pieces.empty()) return;
  const int dev = cuda::device_of(coef);
  cuda::DeviceGuard guard(dev);
  const cudaStream_t s = cuda::current_stream(dev);
  for (const bulk::FftPiece& p : pieces) {
    Plan& pl = plan(p.len);
    ST_CUDA_CHECK(cudaMemcpyAsync(scratch, coef + p.coef, sizeof(float) * 2 * (p.len / 2 + 1),
                                  cudaMemcpyDeviceToDevice, s));
    ST_CUFFT_CHECK(cufftSetStream(pl.c2r, s));
    ST_CUFFT_CHECK(cufftExecC2R(pl.c2r, reinterpret_cast<cufftComplex*>(scratch), out + p.begin));
    scale_kernel<<<cuda::grid_for(p.len), cuda::kBlock, 0, s>>>(out + p.begin, p.len,
                                                                1.0f / static_cast<float>(p.len));
    ST_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace st::fft
