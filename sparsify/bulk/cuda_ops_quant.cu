// CudaOps: quantisation, transforms and dense algebra. The per-element work is in the
// kernels of sparsify/kernels/quantize_cuda.cu (each evaluating the ST_HD formula of
// sparsify/quant_math.h the CPU uses), cuFFT (sparsify/fft_cuda.cu) and cuBLAS; this file
// sizes the outputs and checks the arguments as CpuOps does.
#include <algorithm>
#include <climits>
#include <limits>

#include "core/cuda/check.h"
#include "sparsify/bulk/cuda_ops.h"
#include "sparsify/bulk/cuda_ops_detail.cuh"
#include "sparsify/kernels/quantize_cuda.h"

namespace st::bulk {

namespace {

// Every piece's real range and half spectrum must lie inside their buffers.
void check_pieces(const char* op, const std::vector<FftPiece>& pieces, int64_t real_size,
                  int64_t coef_size) {
  for (const FftPiece& p : pieces)
    ST_CHECK(
        p.begin >= 0 && p.begin + p.len <= real_size && p.coef + 2 * (p.len / 2 + 1) <= coef_size,
        "bulk::CudaOps::", op, ": piece [", p.begin, ", +", p.len, ") with coefficients at ",
        p.coef, " outside ", real_size, " / ", coef_size);
}

int blas_int(int64_t v, const char* what) {
  ST_CHECK(v >= 0 && v <= INT_MAX, "bulk::CudaOps::gemm: ", what, " = ", v,
           " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

}  // namespace

void CudaOps::dgc_momentum(float m, const Buffer& x, Buffer& u, Buffer& v, Buffer& seen) {
  const int64_t n = x.size();
  ST_CHECK(u.size() == n && v.size() == n && seen.size() == n, "bulk::CudaOps::dgc_momentum: x of ",
           n, " elements, state of ", u.size(), ", ", v.size(), ", ", seen.size());
  if (n == 0) return;
  cuda::DeviceGuard guard(dev());
  quant::dgc_momentum_cuda(m, f32(x), n, f32(u), f32(v), f32(seen));
}

float CudaOps::vgc_test(const Buffer& x, const Buffer* aux, const Buffer* grad, float inv_batch,
                        float alpha, float zeta, float tau, Buffer& v, Buffer& out) {
  const int64_t n = x.size();
  ST_CHECK(v.size() == n && (aux || grad), "bulk::CudaOps::vgc_test: x of ", n, " elements, v of ",
           v.size(), aux || grad ? "" : ", neither aux nor grad");
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
  ST_CHECK(count >= 1 && offset >= 0 && offset + count <= words.size(),
           "bulk::CudaOps::vgc_unpack: ", count, " words from ", offset, " of ", words.size());
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
  ST_CHECK(scales_at >= 0 && scales_at + groups <= words.size(),
           "bulk::CudaOps::dequantize: ", groups, " scales from ", scales_at, " of ", words.size(),
           " words");
  resize(values, Elem::F32, n);
  if (n == 0) return;
  cuda::DeviceGuard guard(dev());
  quant::dequantize_cuda(q, u32(codes), n, u32(words) + scales_at, f32(values));
}

void CudaOps::pack_bits(const Buffer& codes, int bits, Buffer& words, int64_t at) {
  ST_CHECK(bits >= 1 && bits <= 32, "bulk::CudaOps::pack_bits: ", bits, " bits per code");
  const int64_t n = codes.size(), nw = (n * bits + 31) / 32;
  ST_CHECK(at >= 0 && at + nw <= words.size(), "bulk::CudaOps::pack_bits: ", nw, " words from ", at,
           " of ", words.size());
  if (n == 0) return;
  cuda::DeviceGuard guard(dev());
  quant::pack_bits_cuda(u32(codes), n, bits, u32(words) + at);
}

void CudaOps::unpack_bits(const Buffer& words, int64_t at, int64_t count, int bits, Buffer& codes) {
  ST_CHECK(bits >= 1 && bits <= 32, "bulk::CudaOps::unpack_bits: ", bits, " bits per code");
  const int64_t nw = (count * bits + 31) / 32;
  ST_CHECK(at >= 0 && count >= 0 && at + nw <= words.size(), "bulk::CudaOps::unpack_bits: ", count,
           " codes of ", bits, " bits from word ", at, " of ", words.size());
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
  detail::check_range(x.size(), r, "abs_min_nonzero");
  if (r.size() <= 0) return 0.0f;
  cuda::DeviceGuard guard(dev());
  return quant::abs_min_nonzero_cuda(f32(x) + r.begin, r.size());
}

// --- FFT ---

void CudaOps::rfft(const Buffer& x, const std::vector<FftPiece>& pieces, Buffer& coef) {
  check_pieces("rfft", pieces, x.size(), coef.size());
  if (pieces.empty()) return;
  cuda::DeviceGuard guard(dev());
  if (!fft_) fft_ = std::make_unique<fft::CufftPlans>();
  fft_->rfft(f32(x), pieces, f32(coef));
}

void CudaOps::irfft(const Buffer& coef, const std::vector<FftPiece>& pieces, Buffer& out) {
  check_pieces("irfft", pieces, out.size(), coef.size());
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
  int64_t total = 0, last = 0;
  for (const TopkRange& r : ranges) {
    ST_CHECK(r.begin >= last && r.end <= x.size() && r.k >= 1 && r.k <= r.end - r.begin,
             "bulk::CudaOps::topk_abs_ranges: range [", r.begin, ", ", r.end, ") with k = ", r.k,
             " in a buffer of ", x.size());
    last = r.end;
    total += r.k;
  }
  resize(out, Elem::I32, total);
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
  ST_CHECK(a_off >= 0 && a_off + m * k <= A.size() && b_off >= 0 && b_off + k * n <= B.size() &&
               c_off >= 0 && c_off + m * n <= C.size(),
           "bulk::CudaOps::gemm: ", m, "x", k, " times ", k, "x", n, " outside buffers of ",
           A.size(), ", ", B.size(), ", ", C.size());
  if (m == 0 || n == 0) return;
  const int mi = blas_int(m, "m"), ni = blas_int(n, "n"), ki = blas_int(k, "k");
  cuda::DeviceGuard guard(dev());
  ST_CUBLAS_CHECK(cublasSgemm(cuda::context(dev()).cublas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                              trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, ni, mi, ki, &alpha,
                              f32(B) + b_off, std::max(1, trans_b ? ki : ni), f32(A) + a_off,
                              std::max(1, trans_a ? mi : ki), &beta, f32(C) + c_off, ni));
}

}  // namespace st::bulk
