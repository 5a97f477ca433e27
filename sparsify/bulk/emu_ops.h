// bulk::Ops on an emulated device: the CPU kernels (CpuOps) run on the executor of the
// calling thread's current stream for the device, with CudaOps's timing. Calls that return
// nothing are queued and return at once; their outputs are sized on the host first (the
// sizes follow from the arguments, as CudaOps allocates before it launches), and the task
// works on copies of the buffer handles taken then. Calls that return host values
// (statistics, counts, downloads, selections whose count sizes the output) queue and wait.
// finish() waits for the stream. Collectives wait for the stream, then hand the device
// buffers to the emulated collective backend (which orders its own stream after the
// caller's), or stage them through the host for any other backend.
//
// Errors raised inside a queued call (argument checks) surface at the next call that
// waits, as a kernel's error does on a GPU. One EmuOps serves one thread at a time.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "sparsify/bulk/bulk_ops.h"

// The operations EmuOps forwards to the CPU kernels, written once for the declaration and
// the definitions (emu_ops.cpp):
//   LATER(name, params, args)          queued; outputs already sized by the caller
//   SIZED(name, params, args, sizing)  queued after `sizing` sized the outputs on the host
//   WAIT(type, name, params, args)     queued and waited for; returns a host value
#define ST_EMU_OPS(LATER, SIZED, WAIT)                                                             \
  LATER(copy, (const Buffer& src, int64_t src_begin, Buffer& dst, int64_t dst_begin, int64_t n),   \
        (src, src_begin, dst, dst_begin, n))                                                       \
  LATER(fill, (Buffer & b, part::Range r, float v), (b, r, v))                                     \
  LATER(axpy, (float a, const Buffer& x, part::Range r, Buffer& y), (a, x, r, y))                  \
  LATER(scale, (Buffer & y, part::Range r, float a), (y, r, a))                                    \
  LATER(scatter_add, (const Buffer& idx, const Buffer& vals, Buffer& y), (idx, vals, y))           \
  LATER(scatter_scaled, (const Buffer& idx, const Buffer& vals, float a, Buffer& y),               \
        (idx, vals, a, y))                                                                         \
  LATER(zero_at, (const Buffer& idx, Buffer& y), (idx, y))                                         \
  LATER(scatter_axpy, (float a, const Buffer& idx, const Buffer& vals, Buffer& y),                 \
        (a, idx, vals, y))                                                                         \
  LATER(offset_indices, (Buffer & idx, int32_t delta), (idx, delta))                               \
  LATER(dgc_momentum, (float m, const Buffer& x, Buffer& u, Buffer& v, Buffer& seen),              \
        (m, x, u, v, seen))                                                                        \
  LATER(pack_bits, (const Buffer& codes, int bits, Buffer& words, int64_t at),                     \
        (codes, bits, words, at))                                                                  \
  LATER(rfft, (const Buffer& x, const std::vector<FftPiece>& pieces, Buffer& coef),                \
        (x, pieces, coef))                                                                         \
  LATER(irfft, (const Buffer& coef, const std::vector<FftPiece>& pieces, Buffer& out),             \
        (coef, pieces, out))                                                                       \
  LATER(                                                                                           \
      gemm,                                                                                        \
      (bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const Buffer& A,  \
       int64_t a_off, const Buffer& B, int64_t b_off, float beta, Buffer& C, int64_t c_off),       \
      (trans_a, trans_b, m, n, k, alpha, A, a_off, B, b_off, beta, C, c_off))                      \
  SIZED(iota, (Buffer & out, int64_t n, int32_t start), (out, n, start),                           \
        (sized(out, Elem::I32, n)))                                                                \
  SIZED(gather, (const Buffer& x, const Buffer& idx, Buffer& out), (x, idx, out),                  \
        (sized(out, Elem::F32, idx.size())))                                                       \
  SIZED(vgc_pack,                                                                                  \
        (const Buffer& x, const Buffer& idx, float scale, int index_bits, Buffer& packed,          \
         Buffer& values),                                                                          \
        (x, idx, scale, index_bits, packed, values),                                               \
        (sized(packed, Elem::U32, idx.size() + 1), sized(values, Elem::F32, idx.size())))          \
  SIZED(vgc_unpack,                                                                                \
        (const Buffer& words, int64_t offset, int64_t count, int index_bits, Buffer& idx,          \
         Buffer& values),                                                                          \
        (words, offset, count, index_bits, idx, values),                                           \
        (sized(idx, Elem::I32, count - 1), sized(values, Elem::F32, count - 1)))                   \
  SIZED(quantize,                                                                                  \
        (const QuantSpec& q, const Buffer& x, Buffer& scales, Buffer& codes, Buffer& values),      \
        (q, x, scales, codes, values),                                                             \
        (sized(scales, Elem::F32, q.groups(x.size())), sized(codes, Elem::U32, x.size()),          \
         sized(values, Elem::F32, x.size())))                                                      \
  SIZED(dequantize,                                                                                \
        (const QuantSpec& q, const Buffer& codes, const Buffer& words, int64_t scales_at,          \
         Buffer& values),                                                                          \
        (q, codes, words, scales_at, values), (sized(values, Elem::F32, codes.size())))            \
  SIZED(unpack_bits, (const Buffer& words, int64_t at, int64_t count, int bits, Buffer& codes),    \
        (words, at, count, bits, codes), (sized(codes, Elem::U32, count)))                         \
  SIZED(range_float_quantize,                                                                      \
        (const quant::RangeFloat& f, const Buffer& x, Buffer& codes, Buffer& values),              \
        (f, x, codes, values),                                                                     \
        (sized(codes, Elem::U32, x.size()), sized(values, Elem::F32, x.size())))                   \
  SIZED(range_float_dequantize, (const quant::RangeFloat& f, const Buffer& codes, Buffer& values), \
        (f, codes, values), (sized(values, Elem::F32, codes.size())))                              \
  SIZED(sq_magnitudes, (const Buffer& coef, Buffer& mag), (coef, mag),                             \
        (sized(mag, Elem::F32, coef.size() / 2)))                                                  \
  SIZED(pair_indices, (const Buffer& idx, Buffer& out), (idx, out),                                \
        (sized(out, Elem::I32, 2 * idx.size())))                                                   \
  WAIT(void, download, (const Buffer& b, int64_t begin, int64_t n, void* host),                    \
       (b, begin, n, host))                                                                        \
  WAIT(Stats, stats, (const Buffer& x, part::Range r), (x, r))                                     \
  WAIT(int64_t, count_abs, (const Buffer& x, part::Range r, float tau, bool strict),               \
       (x, r, tau, strict))                                                                        \
  WAIT(void, select_abs, (const Buffer& x, part::Range r, float tau, bool strict, Buffer& out),    \
       (x, r, tau, strict, out))                                                                   \
  WAIT(void, threshold_select,                                                                     \
       (const Buffer& x, part::Range owned, float tau, int64_t t, Buffer& out),                    \
       (x, owned, tau, t, out))                                                                    \
  WAIT(float, topk_abs, (const Buffer& x, part::Range r, int64_t k, Buffer& out), (x, r, k, out))  \
  WAIT(float, topk_abs_among, (const Buffer& x, const Buffer& candidates, int64_t k, Buffer& out), \
       (x, candidates, k, out))                                                                    \
  WAIT(void, union_of,                                                                             \
       (const Buffer& all, const std::vector<int64_t>& offsets,                                    \
        const std::vector<int64_t>& counts, int64_t domain, Buffer& out),                          \
       (all, offsets, counts, domain, out))                                                        \
  WAIT(IndexBounds, index_bounds, (const Buffer& idx), (idx))                                      \
  WAIT(bool, same_bits, (const Buffer& a, const Buffer& b), (a, b))                                \
  WAIT(std::vector<int64_t>, segment_counts,                                                       \
       (const Buffer& idx, int64_t begin, int64_t count, const std::vector<int64_t>& segments),    \
       (idx, begin, count, segments))                                                              \
  WAIT(sidco::Moments, exceed_moments,                                                             \
       (const Buffer& x, part::Range r, float tau, double log_scale), (x, r, tau, log_scale))      \
  WAIT(sidco::Moments, exceed_compact,                                                             \
       (const Buffer& x, part::Range r, float tau, const Buffer* pos, Buffer& out_idx,             \
        Buffer& out_vals),                                                                         \
       (x, r, tau, pos, out_idx, out_vals))                                                        \
  WAIT(float, vgc_test,                                                                            \
       (const Buffer& x, const Buffer* aux, const Buffer* grad, float inv_batch, float alpha,      \
        float zeta, float tau, Buffer& v, Buffer& out),                                            \
       (x, aux, grad, inv_batch, alpha, zeta, tau, v, out))                                        \
  WAIT(float, abs_min_nonzero, (const Buffer& x, part::Range r), (x, r))                           \
  WAIT(float, topk_abs_ranges,                                                                     \
       (const Buffer& x, const std::vector<TopkRange>& ranges, Buffer& out), (x, ranges, out))

namespace st::emu {
class Stream;
}

namespace st::bulk {

class EmuOps : public Ops {
 public:
  // `device` must be an emulated device; throws with one line naming it otherwise.
  explicit EmuOps(Device device);
  ~EmuOps() override;
  EmuOps(const EmuOps&) = delete;
  EmuOps& operator=(const EmuOps&) = delete;

  Device device() const override { return device_; }
  const char* name() const override { return "emu"; }

  // On the host: handles and allocations only, no device memory is touched.
  void resize(Buffer& b, Elem e, int64_t n) override;
  Buffer wrap(Tensor& t) override;
  void release(Buffer& wrapped) override;
  Buffer slice(const Buffer& b, int64_t begin, int64_t n) override;
  void finish() override;
  // The host bytes are taken at the call; the copy into the buffer is queued.
  void upload(const void* host, Elem e, int64_t n, Buffer& out) override;

  // Collectives (emu_ops_comm.cpp).
  void allreduce_sum(Communicator& comm, Buffer& b) override;
  void allgatherv(Communicator& comm, const Buffer& in, const std::vector<int64_t>& counts,
                  Buffer& out) override;
  void broadcast(Communicator& comm, Buffer& b, int root) override;
  void allgather(Communicator& comm, const Buffer& in, Buffer& out) override;

#define ST_EMU_DECLARE(name, params, args) void name params override;
#define ST_EMU_DECLARE_SIZED(name, params, args, sizing) void name params override;
#define ST_EMU_DECLARE_WAIT(type, name, params, args) type name params override;
  ST_EMU_OPS(ST_EMU_DECLARE, ST_EMU_DECLARE_SIZED, ST_EMU_DECLARE_WAIT)
#undef ST_EMU_DECLARE
#undef ST_EMU_DECLARE_SIZED
#undef ST_EMU_DECLARE_WAIT

 private:
  class Kernels;  // CpuOps on this device's buffers
  emu::Stream& stream() const;
  // Sizes an output on the host before the call that writes it is queued.
  void sized(Buffer& b, Elem e, int64_t n) {
    resize(b, e, n < 0 ? 0 : n);
  }
  // A tensor viewing exactly the buffer's size() elements (no memory access).
  static Tensor view(const Buffer& b);
  void later(std::function<void(Kernels&)> call);
  template <typename Call>
  auto now(Call call) -> decltype(call());

  Device device_;
  std::shared_ptr<Kernels> kernels_;  // shared with the queued calls
};

}  // namespace st::bulk
