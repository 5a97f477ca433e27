// bulk::Ops on the CPU: the OpenMP kernels of sparsify/kernels/*_cpu.* and the loops the
// exchange patterns always ran, on buffers that are plain 64-byte aligned host tensors.
// A bucket tensor is wrapped without a copy, so routing the CPU path through the
// interface costs a virtual call per pass, not a pass.
//
// Results are deterministic and independent of the thread count: selections come out
// ascending (per-thread pieces joined in thread order), sums run over fixed blocks, and
// scatters run in index order.
#pragma once

#include <vector>

#include "sparsify/bulk/bulk_ops.h"

namespace st::bulk {

class CpuOps : public Ops {
 public:
  Device device() const override { return Device::cpu(); }
  const char* name() const override { return "cpu"; }

  void resize(Buffer& b, Elem e, int64_t n) override;
  Buffer wrap(Tensor& t) override;
  void release(Buffer& wrapped) override;
  void upload(const void* host, Elem e, int64_t n, Buffer& out) override;
  void download(const Buffer& b, int64_t begin, int64_t n, void* host) override;
  void copy(const Buffer& src, int64_t src_begin, Buffer& dst, int64_t dst_begin,
            int64_t n) override;
  void fill(Buffer& b, part::Range r, float v) override;
  void iota(Buffer& out, int64_t n, int32_t start) override;

  void axpy(float a, const Buffer& x, part::Range r, Buffer& y) override;
  void scale(Buffer& y, part::Range r, float a) override;

  Stats stats(const Buffer& x, part::Range r) override;
  int64_t count_abs(const Buffer& x, part::Range r, float tau, bool strict) override;

  void select_abs(const Buffer& x, part::Range r, float tau, bool strict, Buffer& out) override;
  void threshold_select(const Buffer& x, part::Range owned, float tau, int64_t t,
                        Buffer& out) override;
  float topk_abs(const Buffer& x, part::Range r, int64_t k, Buffer& out) override;
  float topk_abs_among(const Buffer& x, const Buffer& candidates, int64_t k, Buffer& out) override;

  void gather(const Buffer& x, const Buffer& idx, Buffer& out) override;
  void scatter_add(const Buffer& idx, const Buffer& vals, Buffer& y) override;
  void scatter_scaled(const Buffer& idx, const Buffer& vals, float a, Buffer& y) override;
  void zero_at(const Buffer& idx, Buffer& y) override;
  void union_of(const Buffer& all, const std::vector<int64_t>& offsets,
                const std::vector<int64_t>& counts, int64_t domain, Buffer& out) override;

  void allreduce_sum(Communicator& comm, Buffer& b) override;
  void allgatherv(Communicator& comm, const Buffer& in, const std::vector<int64_t>& counts,
                  Buffer& out) override;
  void broadcast(Communicator& comm, Buffer& b, int root) override;

  Buffer slice(const Buffer& b, int64_t begin, int64_t n) override;

  // --- Exchange extras ---
  void allgather(Communicator& comm, const Buffer& in, Buffer& out) override;
  void scatter_axpy(float a, const Buffer& idx, const Buffer& vals, Buffer& y) override;
  void offset_indices(Buffer& idx, int32_t delta) override;
  IndexBounds index_bounds(const Buffer& idx) override;
  bool same_bits(const Buffer& a, const Buffer& b) override;
  std::vector<int64_t> segment_counts(const Buffer& idx, int64_t begin, int64_t count,
                                      const std::vector<int64_t>& segments) override;
  void* host_memory(const Buffer& b) override { return memory(b); }

  // --- Threshold-family extras (sp1; defined in cpu_ops_threshold.cpp) ---
  sidco::Moments exceed_moments(const Buffer& x, part::Range r, float tau,
                                double log_scale) override;
  sidco::Moments exceed_compact(const Buffer& x, part::Range r, float tau, const Buffer* pos,
                                Buffer& out_idx, Buffer& out_vals) override;

 private:
  std::vector<std::vector<int32_t>> block_hits_;  // exceed_compact: each block's hits

 public:
  // --- Quantisation, transforms, dense algebra (sp2; defined in cpu_ops_quant.cpp) ---
  void dgc_momentum(float m, const Buffer& x, Buffer& u, Buffer& v, Buffer& seen) override;
  float vgc_test(const Buffer& x, const Buffer* aux, const Buffer* grad, float inv_batch,
                 float alpha, float zeta, float tau, Buffer& v, Buffer& out) override;
  void vgc_pack(const Buffer& x, const Buffer& idx, float scale, int index_bits, Buffer& packed,
                Buffer& values) override;
  void vgc_unpack(const Buffer& words, int64_t offset, int64_t count, int index_bits, Buffer& idx,
                  Buffer& values) override;
  void quantize(const QuantSpec& q, const Buffer& x, Buffer& scales, Buffer& codes,
                Buffer& values) override;
  void dequantize(const QuantSpec& q, const Buffer& codes, const Buffer& words, int64_t scales_at,
                  Buffer& values) override;
  void pack_bits(const Buffer& codes, int bits, Buffer& words, int64_t at) override;
  void unpack_bits(const Buffer& words, int64_t at, int64_t count, int bits,
                   Buffer& codes) override;
  void range_float_quantize(const quant::RangeFloat& f, const Buffer& x, Buffer& codes,
                            Buffer& values) override;
  void range_float_dequantize(const quant::RangeFloat& f, const Buffer& codes,
                              Buffer& values) override;
  float abs_min_nonzero(const Buffer& x, part::Range r) override;
  void rfft(const Buffer& x, const std::vector<FftPiece>& pieces, Buffer& coef) override;
  void irfft(const Buffer& coef, const std::vector<FftPiece>& pieces, Buffer& out) override;
  void sq_magnitudes(const Buffer& coef, Buffer& mag) override;
  float topk_abs_ranges(const Buffer& x, const std::vector<TopkRange>& ranges,
                        Buffer& out) override;
  void pair_indices(const Buffer& idx, Buffer& out) override;
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const Buffer& A, int64_t a_off, const Buffer& B, int64_t b_off, float beta, Buffer& C,
            int64_t c_off) override;

 private:
  // quantize() of TernGrad and EF-signSGD: block sums, scales, codes and values.
  void scaled_groups(const QuantSpec& q, const float* x, int64_t n, float* scales, uint32_t* codes,
                     float* values);
  struct FftCache;                                // FFTW plans by length (cpu_ops_quant.cpp)
  std::shared_ptr<FftCache> fft_;                 // made on the first transform
  std::vector<std::vector<int32_t>> range_hits_;  // topk_abs_ranges / vgc_test: per-part hits
  std::vector<float> range_cut_;

 public:
 protected:
  // Where a buffer's elements are (null when it has no storage yet). Every pass reaches
  // buffer memory through this one call (f32 / i32 below), so a checking implementation
  // can watch each access.
  virtual void* memory(const Buffer& b);
  float* f32(Buffer& b) { return static_cast<float*>(memory(b)); }
  const float* f32(const Buffer& b) { return static_cast<const float*>(memory(b)); }
  int32_t* i32(Buffer& b) { return static_cast<int32_t*>(memory(b)); }
  const int32_t* i32(const Buffer& b) { return static_cast<const int32_t*>(memory(b)); }
  // A tensor viewing exactly the buffer's size() elements (collectives).
  Tensor view(const Buffer& b);
  // Copies a selection kernel's output into `out` (I32).
  void put_indices(const std::vector<int32_t>& v, Buffer& out);

 private:
  std::vector<int32_t> scratch_, scratch2_;  // kernel outputs before they land in a Buffer
  std::vector<uint8_t> marker_;              // union_of: one flag per position, zero between uses
};

}  // namespace st::bulk
