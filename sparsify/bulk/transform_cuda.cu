// CudaOps: the transforms (op_list.h, ST_BULK_TRANSFORM_OPS): cuFFT per piece
// (sparsify/fft_cuda.cu) and the coefficient passes of sparsify/kernels/quantize_cuda.cu.
#include <algorithm>
#include <limits>

#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cuda_ops.h"
#include "sparsify/bulk/cuda_ops_detail.cuh"
#include "sparsify/kernels/transform_cuda.h"

namespace st::bulk {

void CudaOps::rfft(const Buffer& x, const std::vector<FftPiece>& pieces, Buffer& coef) {
  check::fft_pieces("rfft", pieces, x.size(), coef.size());
  if (pieces.empty()) return;
  cuda::DeviceGuard guard(dev());
  if (!fft_) fft_ = std::make_unique<fft::CufftPlans>();
  fft_->rfft(f32(x), pieces, f32(coef));
}

void CudaOps::irfft(const Buffer& coef, const std::vector<FftPiece>& pieces, Buffer& out) {
  check::fft_pieces("irfft", pieces, out.size(), coef.size());
  if (pieces.empty()) return;
  cuda::DeviceGuard guard(dev());
  if (!fft_) fft_ = std::make_unique<fft::CufftPlans>();
  int64_t largest = 0;
  for (const FftPiece& p : pieces) largest = std::max(largest, 2 * (p.len / 2 + 1));
  // C2R overwrites its input: each piece is transformed from a copy in this scratch.
  detail::Scratch scratch(4 * static_cast<size_t>(largest), dev());
  fft_->irfft(f32(coef), pieces, f32(out), scratch.at<float>(0));
}

void CudaOps::sq_magnitudes(const Buffer& coef, Buffer& mag) {
  const int64_t nc = coef.size() / 2;
  resize(mag, Elem::F32, nc);
  if (nc == 0) return;
  cuda::DeviceGuard guard(dev());
  quant::sq_magnitudes_cuda(f32(coef), nc, f32(mag));
}

// Per range: topk_abs when k < length; when k is the whole range, every position, and the
// k-th largest is the smallest |x| (topk_abs_among over all of them), as on the CPU.
float CudaOps::topk_abs_ranges(const Buffer& x, const std::vector<TopkRange>& ranges, Buffer& out) {
  resize(out, Elem::I32, check::topk_ranges(ranges, x.size()));
  float cut = std::numeric_limits<float>::infinity();
  Buffer one, all;
  int64_t at = 0;
  for (const TopkRange& r : ranges) {
    float kth;
    if (r.k < r.end - r.begin) {
      kth = topk_abs(x, {r.begin, r.end}, r.k, one);
    } else {
      iota(all, r.end - r.begin, static_cast<int32_t>(r.begin));
      kth = topk_abs_among(x, all, r.k, one);
    }
    cut = std::min(cut, kth);
    copy(one, 0, out, at, r.k);
    at += r.k;
  }
  return cut;
}

void CudaOps::pair_indices(const Buffer& idx, Buffer& out) {
  const int64_t m = idx.size();
  resize(out, Elem::I32, 2 * m);
  if (m == 0) return;
  cuda::DeviceGuard guard(dev());
  quant::pair_indices_cuda(i32(idx), m, i32(out));
}

}  // namespace st::bulk
