// CudaOps: quantisation and bit packing (op_list.h, ST_BULK_QUANT_OPS). The per-element
// work is in the kernels of sparsify/kernels/quantize_cuda.cu (the ST_HD formulas of
// sparsify/quant_math.h the CPU uses); this file sizes the outputs and checks the
// arguments as CpuOps does.
#include <algorithm>

#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cuda_ops.h"
#include "sparsify/bulk/cuda_ops_detail.cuh"
#include "sparsify/kernels/quant_cuda.h"

namespace st::bulk {

namespace {

using detail::launch;

__global__ void differ_kernel(const uint32_t* a, const uint32_t* b, int32_t* differ, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) {
    if (a[i] != b[i]) *differ = 1;  // any writer; the value is all that matters
  }
}

}  // namespace

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

bool CudaOps::same_bits(const Buffer& a, const Buffer& b) {
  if (a.size() != b.size() || a.elem() != b.elem()) return false;
  if (a.empty()) return true;
  cuda::DeviceGuard guard(dev());
  const cudaStream_t stream = cuda::current_stream(dev());
  detail::Scratch flag(sizeof(int32_t), dev());
  ST_CUDA_CHECK(cudaMemsetAsync(flag.at<int32_t>(0), 0, sizeof(int32_t), stream));
  launch(a.size(), stream, differ_kernel, static_cast<const uint32_t*>(storage(a).raw()),
         static_cast<const uint32_t*>(storage(b).raw()), flag.at<int32_t>(0));
  int32_t differ = 0;
  to_host(flag.at<int32_t>(0), sizeof(int32_t), &differ);
  return differ == 0;
}

}  // namespace st::bulk
