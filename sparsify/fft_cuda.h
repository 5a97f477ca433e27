// cuFFT twin of the FFT sparsifier's transforms (sparsify/fft.cpp; Wang et al., HPDC 2020):
// R2C forward into the same interleaved (re, im) half-spectrum layout as the CPU domain,
// coefficient magnitudes, and the C2R inverse scaled by 1/N. Device buffers, the device's
// current stream, plans cached per length. Built with the CUDA backend only.
#pragma once

#include <cstdint>
#include <map>

namespace st::fft {

class CufftPlans {
 public:
  CufftPlans() = default;
  ~CufftPlans();
  CufftPlans(const CufftPlans&) = delete;
  CufftPlans& operator=(const CufftPlans&) = delete;

  // coef: 2 (len/2 + 1) floats.
  void forward(const float* x, int64_t len, float* coef);
  // mag[j] = |coef_j| for ncoef complex coefficients.
  static void magnitudes(const float* coef, int64_t ncoef, float* mag);
  // out = IFFT(coef) / len; `scratch` holds 2 (len/2 + 1) floats (C2R overwrites its input).
  void inverse(const float* coef, int64_t len, float* out, float* scratch);

 private:
  struct Plan {
    int r2c = 0, c2r = 0;  // cufftHandle
  };
  Plan& plan(int64_t len);
  std::map<int64_t, Plan> plans_;
};

}  // namespace st::fft
