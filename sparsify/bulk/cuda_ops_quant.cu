// CudaOps: quantisation, transforms and dense algebra. The per-element work is in the
// kernels of sparsify/kernels/quantize_cuda.cu (each evaluating the ST_HD formula of
// sparsify/quant_math.h the CPU uses), cuFFT (sparsify/fft_cuda.cu) and cuBLAS; this file
// sizes the outputs and checks the arguments as CpuOps does.
#include <algorithm>
#include <climits>
#include <limits>

#include "core/cuda/check.h"
#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cuda_ops.h"
#include "sparsify/bulk/cuda_ops_detail.cuh"
#include "sparsify/kernels/quantize_cuda.h"

namespace st::bulk {

namespace {

int blas_int(int64_t v, const char* what) {
  ST_CHECK(v >= 0 && v <= INT_MAX, "bulk::Ops::gemm: ", what, " = ", v,
           " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

}  // namespace

void CudaOps::dgc_momentum(float m, const Buffer& x, Buffer& u, Buffer& v, Buffer& seen) {
  const int64_t n = x.size();
  check::dgc_state(n, u, v, seen);
  if (n == 0) return;
  cuda::DeviceGuard guard(dev());
  quant::dgc_momentum_cuda(m, f32(x), n, f32(u), f32(v), f32(seen));
}

float CudaOps::vgc_test(const Buffer& x, const Buffer* aux, const Buffer* grad, float inv_batch,
                        float alpha, float zeta, float tau, Buffer& v, Buffer& out) {
  const int64_t n = x.size();
  check::vgc_inputs(n, v, aux || grad);
  resize(out, Elem::I32, n);
  if (n == 0) return 0.0f;
  cuda::DeviceGuard guard(dev());
  float max_sent = 0.0f;
  const int64_t count =
      quant::vgc_test_cuda(f32(x), aux ? f32(*aux) : nullptr, grad ? f32(*grad) : nullptr, n,
                           inv_batch, alpha, zeta, tau, f32(v), i32(out), &max_sent);
  set_size(out, Elem::I32, count);
  return max_sent;
}

void CudaOps::vgc_pack(const Buffer& x, const Buffer& idx, float scale, int index_bits,
                       Buffer& packed, Buffer& values) {
  const int64_t m = idx.size();
  resize(packed, Elem::U32, m + 1);
  resize(values, Elem::F32, m);
  cuda::DeviceGuard guard(dev());
  quant::vgc_pack_cuda(f32(x), i32(idx), m, scale, index_bits, u32(packed), f32(values));
}

void CudaOps::vgc_unpack(const Buffer& words, int64_t offset, int64_t count, int index_bits,
                         Buffer& idx, Buffer& values) {
  check::vgc_words(words, offset, count);
  resize(idx, Elem::I32, count - 1);
  resize(values, Elem::F32, count - 1);
  cuda::DeviceGuard guard(dev());
  quant::vgc_unpack_cuda(u32(words) + offset, count, index_bits, i32(idx), f32(values));
}

void CudaOps::quantize(const QuantSpec& q, const Buffer& x, Buffer& scales, Buffer& codes,
                       Buffer& values) {
  const int64_t n = x.size();
  resize(scales, Elem::F32, q.groups(n));
  resize(codes, Elem::U32, n);
  resize(values, Elem::F32, n);
  if (n == 0) return;
  cuda::DeviceGuard guard(dev());
  quant::quantize_cuda(q, f32(x), n, f32(scales), u32(codes), f32(values));
}

void CudaOps::dequantize(const QuantSpec& q, const Buffer& codes, const Buffer& words,
                         int64_t scales_at, Buffer& values) {
  const int64_t n = codes.size(), groups = q.groups(n);
  check::scale_words(groups, scales_at, words);
  resize(values, Elem::F32, n);
  if (n == 0) return;
  cuda::DeviceGuard guard(dev());
  quant::dequantize_cuda(q, u32(codes), n, u32(words) + scales_at, f32(values));
}

void CudaOps::pack_bits(const Buffer& codes, int bits, Buffer& words, int64_t at) {
  const int64_t n = codes.size();
  check::packed_words("pack_bits", bits, n, at, words);
  if (n == 0) return;
  cuda::DeviceGuard guard(dev());
  quant::pack_bits_cuda(u32(codes), n, bits, u32(words) + at);
}

void CudaOps::unpack_bits(const Buffer& words, int64_t at, int64_t count, int bits, Buffer& codes) {
  check::packed_words("unpack_bits", bits, count, at, words);
  resize(codes, Elem::U32, count);
  if (count == 0) return;
  cuda::DeviceGuard guard(dev());
  quant::unpack_bits_cuda(u32(words) + at, count, bits, u32(codes));
}

void CudaOps::range_float_quantize(const quant::RangeFloat& f, const Buffer& x, Buffer& codes,
                                   Buffer& values) {
  const int64_t n = x.size();
  resize(codes, Elem::U32, n);
  resize(values, Elem::F32, n);
  if (n == 0) return;
  cuda::DeviceGuard guard(dev());
  quant::range_float_cuda(f32(x), n, f, u32(codes), f32(values));
}

void CudaOps::range_float_dequantize(const quant::RangeFloat& f, const Buffer& codes,
                                     Buffer& values) {
  const int64_t n = codes.size();
  resize(values, Elem::F32, n);
  if (n == 0) return;
  cuda::DeviceGuard guard(dev());
  quant::range_float_decode_cuda(u32(codes), n, f, f32(values));
}

float CudaOps::abs_min_nonzero(const Buffer& x, part::Range r) {
  check::range("abs_min_nonzero", x.size(), r);
  if (r.size() <= 0) return 0.0f;
  cuda::DeviceGuard guard(dev());
  return quant::abs_min_nonzero_cuda(f32(x) + r.begin, r.size());
}

// --- FFT ---

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

// --- Dense algebra ---

// Row-major C (m x n) is column-major C^T (n x m), so the product is issued as
// C^T = op(B)^T op(A)^T with the operands swapped; a row-major matrix stored r x c is a
// column-major c x r one with leading dimension c.
void CudaOps::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const Buffer& A, int64_t a_off, const Buffer& B, int64_t b_off, float beta,
                   Buffer& C, int64_t c_off) {
  check::gemm_shapes(m, n, k, A, a_off, B, b_off, C, c_off);
  if (m == 0 || n == 0) return;
  const int mi = blas_int(m, "m"), ni = blas_int(n, "n"), ki = blas_int(k, "k");
  cuda::DeviceGuard guard(dev());
  ST_CUBLAS_CHECK(cublasSgemm(cuda::context(dev()).cublas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                              trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, ni, mi, ki, &alpha,
                              f32(B) + b_off, std::max(1, trans_b ? ki : ni), f32(A) + a_off,
                              std::max(1, trans_a ? mi : ki), &beta, f32(C) + c_off, ni));
}

}  // namespace st::bulk
