// bulk::Ops on a CUDA device: CUB for compaction (DeviceSelect), exact top-k
// (DeviceRadixSort on the |x| bit patterns, stable, so ties go to the lower index),
// statistics (DeviceReduce) and unions (sort + DeviceSelect::Unique); small kernels of its
// own for gather, scatter, fill, iota and the element-wise passes, each evaluating the
// ST_HD formula the CPU implementation uses (sparsify/partition_math.h).
//
// Streams. Every call is queued on the calling thread's current stream for the device
// (cuda::current_stream): the hook runs on the communication thread after the reducer's
// ready event, so bucket work lands on that thread's own stream, in call order. Calls that
// return host values (stats, counts, downloads, selections, whose count sizes the output)
// copy them with cudaMemcpyAsync into pinned memory and wait for that stream. Scratch
// memory comes from the caching allocator on the same stream, so it is reused only in
// stream order. One CudaOps serves one thread at a time (its pinned staging buffer is
// per object), like CpuOps.
//
// Collectives. On the NCCL communicator the device buffers go to NCCL directly: the call
// first waits for this thread's stream (NCCL runs on the communicator's own stream and
// returns when it is done), so no event is needed on either side. Any other backend
// (MPI, Local) takes host tensors, so the buffer is staged through the host.
//
// Determinism. Selections, top-k, gather, scatters (repeated positions are applied in
// index order after a stable sort, exactly as the CPU loop does) and unions are bit-exact
// with CpuOps; sums in stats() are accumulated in double in CUB's fixed reduction order,
// the same from run to run but not the CPU's block order. union_of returns the positions
// ascending (CpuOps returns first appearances in rank order: both depend only on `all`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "sparsify/bulk/bulk_ops.h"
#include "sparsify/fft_cuda.h"

namespace st::bulk {

class CudaOps : public Ops {
 public:
  // `device` must be a CUDA device; throws with one line naming it otherwise.
  explicit CudaOps(Device device);
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  Device device() const override { return device_; }
  const char* name() const override { return "cuda"; }

  void resize(Buffer& b, Elem e, int64_t n) override;
  void finish() override;
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

  // --- Threshold-family extras (cuda_ops_threshold.cu) ---
  sidco::Moments exceed_moments(const Buffer& x, part::Range r, float tau,
                                double log_scale) override;
  sidco::Moments exceed_compact(const Buffer& x, part::Range r, float tau, const Buffer* pos,
                                Buffer& out_idx, Buffer& out_vals) override;

  // --- Quantisation, transforms, dense algebra (cuda_ops_quant.cu) ---
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

 protected:
  // Typed device pointers (null for a buffer without storage).
  static float* f32(Buffer& b);
  static const float* f32(const Buffer& b);
  static int32_t* i32(Buffer& b);
  static const int32_t* i32(const Buffer& b);
  static uint32_t* u32(Buffer& b) { return reinterpret_cast<uint32_t*>(i32(b)); }
  static const uint32_t* u32(const Buffer& b) { return reinterpret_cast<const uint32_t*>(i32(b)); }
  // A tensor viewing exactly the buffer's size() elements (collectives).
  static Tensor view(const Buffer& b);
  int dev() const { return device_.index; }
  // Copies `bytes` from device memory to `host` through the pinned staging buffer and
  // waits for this thread's stream.
  void to_host(const void* device_ptr, size_t bytes, void* host);

 private:
  // Grows the pinned staging buffer to at least `bytes`.
  void* pinned(size_t bytes);

  Device device_;
  void* pinned_ = nullptr;  // cudaMallocHost
  size_t pinned_bytes_ = 0;
  std::unique_ptr<fft::CufftPlans> fft_;  // cuFFT plans by length, made on first use
};

}  // namespace st::bulk
