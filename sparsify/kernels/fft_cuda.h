// cuFFT behind the real-FFT passes of bulk::Ops (Ops::rfft / Ops::irfft; the FFT
// sparsifier of Wang et al., HPDC 2020): R2C per piece into the interleaved (re, im)
// half-spectrum layout of the CPU implementation, and the C2R inverse scaled by 1/N (a
// float multiplication, as on the CPU). Device buffers, the device's current stream,
// plans cached per length; the plans share one work area (they run one after another on
// one stream), sized for the largest, instead of one each. Built with the CUDA backend only.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "sparsify/transform_pieces.h"

namespace st::fft {

class CufftPlans {
 public:
  CufftPlans() = default;
  ~CufftPlans();
  CufftPlans(const CufftPlans&) = delete;
  CufftPlans& operator=(const CufftPlans&) = delete;

  // coef[p.coef, p.coef + 2 (p.len/2 + 1)) = the half spectrum of x[p.begin, + p.len).
  void rfft(const float* x, const std::vector<bulk::FftPiece>& pieces, float* coef);
  // out[p.begin, + p.len) = IFFT(coef of the piece) * (1 / len); `scratch` holds the
  // largest piece's 2 (len/2 + 1) floats (C2R overwrites its input).
  void irfft(const float* coef, const std::vector<bulk::FftPiece>& pieces, float* out,
             float* scratch);

 private:
  struct Plan {
    int r2c = 0, c2r = 0;  // cufftHandle
  };
  // The plans of `len`, with the shared work area (grown if they need more) set on both.
  Plan& plan(int64_t len, int device);
  template <typename Fn>
  void each_piece(const float* on, const std::vector<bulk::FftPiece>& pieces, Fn fn);
  std::map<int64_t, Plan> plans_;
  void* work_ = nullptr;  // device memory shared by every plan
  size_t work_bytes_ = 0;
  int work_device_ = 0;
};

}  // namespace st::fft
