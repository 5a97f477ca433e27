#include <cufft.h>

#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/storage.h"
#include "sparsify/kernels/fft_cuda.h"

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
  if (work_) cuda::device_free(work_, work_device_);
}

namespace {
// A plan without a work area of its own; `need` grows to the largest it asks for.
cufftHandle make_plan(int64_t len, cufftType type, size_t& need) {
  cufftHandle h;
  ST_CUFFT_CHECK(cufftCreate(&h));
  ST_CUFFT_CHECK(cufftSetAutoAllocation(h, 0));
  size_t bytes = 0;
  ST_CUFFT_CHECK(cufftMakePlan1d(h, static_cast<int>(len), type, 1, &bytes));
  need = std::max(need, bytes);
  return h;
}
}  // namespace

CufftPlans::Plan& CufftPlans::plan(int64_t len, int device) {
  auto it = plans_.find(len);
  if (it == plans_.end()) {
    size_t need = work_bytes_;
    Plan p;
    p.r2c = make_plan(len, CUFFT_R2C, need);
    p.c2r = make_plan(len, CUFFT_C2R, need);
    it = plans_.emplace(len, p).first;
    if (need > work_bytes_) {
      // Earlier plans may still run on the stream with the old area: wait for them.
      ST_CUDA_CHECK(cudaStreamSynchronize(cuda::current_stream(device)));
      if (work_) cuda::device_free(work_, work_device_);
      work_ = cuda::device_alloc(need, device);
      work_bytes_ = need;
      work_device_ = device;
    }
  }
  ST_CUFFT_CHECK(cufftSetWorkArea(it->second.r2c, work_));
  ST_CUFFT_CHECK(cufftSetWorkArea(it->second.c2r, work_));
  return it->second;
}

// Runs fn(plan, piece, stream) for each piece on the device of `on`, on its current stream.
template <typename Fn>
void CufftPlans::each_piece(const float* on, const std::vector<bulk::FftPiece>& pieces, Fn fn) {
  if (pieces.empty()) return;
  const int dev = cuda::device_of(on);
  cuda::DeviceGuard guard(dev);
  const cudaStream_t s = cuda::current_stream(dev);
  for (const bulk::FftPiece& p : pieces) fn(plan(p.len, dev), p, s);
}

void CufftPlans::rfft(const float* x, const std::vector<bulk::FftPiece>& pieces, float* coef) {
  each_piece(coef, pieces, [&](Plan& pl, const bulk::FftPiece& p, cudaStream_t s) {
    ST_CUFFT_CHECK(cufftSetStream(pl.r2c, s));
    ST_CUFFT_CHECK(cufftExecR2C(pl.r2c, const_cast<cufftReal*>(x + p.begin),
                                reinterpret_cast<cufftComplex*>(coef + p.coef)));
  });
}

void CufftPlans::irfft(const float* coef, const std::vector<bulk::FftPiece>& pieces, float* out,
                       float* scratch) {
  each_piece(coef, pieces, [&](Plan& pl, const bulk::FftPiece& p, cudaStream_t s) {
    ST_CUDA_CHECK(cudaMemcpyAsync(scratch, coef + p.coef, sizeof(float) * 2 * (p.len / 2 + 1),
                                  cudaMemcpyDeviceToDevice, s));
    ST_CUFFT_CHECK(cufftSetStream(pl.c2r, s));
    ST_CUFFT_CHECK(cufftExecC2R(pl.c2r, reinterpret_cast<cufftComplex*>(scratch), out + p.begin));
    scale_kernel<<<cuda::grid_for(p.len), cuda::kBlock, 0, s>>>(out + p.begin, p.len,
                                                                1.0f / static_cast<float>(p.len));
    ST_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace st::fft
