// CudaOps: the method-specific passes (DGC's momentum correction, VGC's variance test and
// words; op_list.h, ST_BULK_METHOD_OPS). The per-element work is in the kernels of
// sparsify/kernels/quantize_cuda.cu, each evaluating the ST_HD formula the CPU uses; this
// file sizes the outputs and checks the arguments as CpuOps does.
#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cuda_ops.h"
#include "sparsify/bulk/cuda_ops_detail.cuh"
#include "sparsify/kernels/quantize_cuda.h"

namespace st::bulk {

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

}  // namespace st::bulk
