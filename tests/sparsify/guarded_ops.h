// A checking bulk::Ops for tests: the CPU implementation, except that between calls every
// buffer's memory holds poison (quiet NaNs in float buffers, large negative numbers in
// index buffers) while a private shadow keeps the true contents. Each call writes the
// shadows of the buffers it is given back into their memory, runs CpuOps, saves the
// memory into the shadows and poisons it again. wrap() copies the bucket tensor into a
// buffer of its own and poisons the tensor; release() writes the result back.
//
// So code that goes through bulk::Ops gets exactly the plain CPU results, and code that
// reads a buffer's or a wrapped tensor's memory behind the interface reads poison (a
// different result, or a crash on a poisoned index), while its direct writes are undone
// at the next call. host_memory() gives null, so host forms of methods that are not
// device-ready run on copies. The guard tests compare a run on GuardedOps with one on
// CpuOps bit for bit.
//
// Every bulk::Ops call needs its override here (a scope around the CpuOps call): a call
// without one reaches CpuOps::memory() outside any scope, which throws naming the gap.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <vector>

#include "sparsify/bulk/cpu_ops.h"

namespace st::test {

class GuardedOps : public bulk::CpuOps {
 public:
  using Buffer = bulk::Buffer;
  using Elem = bulk::Elem;
  using Range = part::Range;

  Device device() const override { return Device::cpu(); }
  const char* name() const override { return "guarded-cpu"; }

  void resize(Buffer& b, Elem e, int64_t n) override;
  Buffer wrap(Tensor& t) override;
  void release(Buffer& wrapped) override;
  void upload(const void* host, Elem e, int64_t n, Buffer& out) override;
  void download(const Buffer& b, int64_t begin, int64_t n, void* host) override;
  void copy(const Buffer& src, int64_t src_begin, Buffer& dst, int64_t dst_begin,
            int64_t n) override;
  void fill(Buffer& b, Range r, float v) override;
  void iota(Buffer& out, int64_t n, int32_t start) override;
  void axpy(float a, const Buffer& x, Range r, Buffer& y) override;
  void scale(Buffer& y, Range r, float a) override;
  bulk::Stats stats(const Buffer& x, Range r) override;
  int64_t count_abs(const Buffer& x, Range r, float tau, bool strict) override;
  void select_abs(const Buffer& x, Range r, float tau, bool strict, Buffer& out) override;
  void threshold_select(const Buffer& x, Range owned, float tau, int64_t t, Buffer& out) override;
  float topk_abs(const Buffer& x, Range r, int64_t k, Buffer& out) override;
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
  void allgather(Communicator& comm, const Buffer& in, Buffer& out) override;
  void scatter_axpy(float a, const Buffer& idx, const Buffer& vals, Buffer& y) override;
  void offset_indices(Buffer& idx, int32_t delta) override;
  bulk::IndexBounds index_bounds(const Buffer& idx) override;
  bool same_bits(const Buffer& a, const Buffer& b) override;
  std::vector<int64_t> segment_counts(const Buffer& idx, int64_t begin, int64_t count,
                                      const std::vector<int64_t>& segments) override;
  void* host_memory(const Buffer&) override { return nullptr; }

  // The threshold family's and the quantisation / transform / dense-algebra passes.
  sidco::Moments exceed_moments(const Buffer& x, part::Range r, float tau,
                                double log_scale) override;
  sidco::Moments exceed_compact(const Buffer& x, part::Range r, float tau, const Buffer* pos,
                                Buffer& out_idx, Buffer& out_vals) override;
  void dgc_momentum(float m, const Buffer& x, Buffer& u, Buffer& v, Buffer& seen) override;
  float vgc_test(const Buffer& x, const Buffer* aux, const Buffer* grad, float inv_batch,
                 float alpha, float zeta, float tau, Buffer& v, Buffer& out) override;
  void vgc_pack(const Buffer& x, const Buffer& idx, float scale, int index_bits, Buffer& packed,
                Buffer& values) override;
  void vgc_unpack(const Buffer& words, int64_t offset, int64_t count, int index_bits, Buffer& idx,
                  Buffer& values) override;
  void quantize(const bulk::QuantSpec& q, const Buffer& x, Buffer& scales, Buffer& codes,
                Buffer& values) override;
  void dequantize(const bulk::QuantSpec& q, const Buffer& codes, const Buffer& words,
                  int64_t scales_at, Buffer& values) override;
  void pack_bits(const Buffer& codes, int bits, Buffer& words, int64_t at) override;
  void unpack_bits(const Buffer& words, int64_t at, int64_t count, int bits,
                   Buffer& codes) override;
  void range_float_quantize(const quant::RangeFloat& f, const Buffer& x, Buffer& codes,
                            Buffer& values) override;
  void range_float_dequantize(const quant::RangeFloat& f, const Buffer& codes,
                              Buffer& values) override;
  float abs_min_nonzero(const Buffer& x, Range r) override;
  void rfft(const Buffer& x, const std::vector<bulk::FftPiece>& pieces, Buffer& coef) override;
  void irfft(const Buffer& coef, const std::vector<bulk::FftPiece>& pieces, Buffer& out) override;
  void sq_magnitudes(const Buffer& coef, Buffer& mag) override;
  float topk_abs_ranges(const Buffer& x, const std::vector<bulk::TopkRange>& ranges,
                        Buffer& out) override;
  void pair_indices(const Buffer& idx, Buffer& out) override;
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const Buffer& A, int64_t a_off, const Buffer& B, int64_t b_off, float beta, Buffer& C,
            int64_t c_off) override;

  // Calls that restored and re-poisoned memory so far (the tests check the guard ran).
  int64_t guarded_calls() const { return calls_; }

 private:
  // One allocation: its tensor (kept alive, so its address is never reused) and the
  // true contents of its bytes.
  struct Alloc {
    Tensor base;
    std::vector<uint8_t> shadow;
    Tensor wrapped;  // the bucket tensor behind it (wrap()), else undefined
  };
  // One call: restores the memory of the buffers it is given; at its end saves and
  // poisons them (and whatever memory they hold after the call). Calls that CpuOps makes
  // inside a call (resize, offset_indices, ...) nest: their buffers join the outer call's.
  class Scope {
   public:
    Scope(GuardedOps& g, std::initializer_list<const Buffer*> bufs);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    GuardedOps& g_;
    std::vector<const Buffer*> bufs_;
  };

  // The allocation holding b's memory, registered on first sight (null: no memory).
  Alloc* find(const Buffer& b);
  void restore(Alloc* a);
  static void poison(Tensor& t);
  // CpuOps reaches memory only here: outside a call that is a call without its override.
  void* memory(const Buffer& b) override;

  std::map<uintptr_t, Alloc> allocs_;  // by base address
  std::vector<Alloc*> restored_;       // in the current call
  int depth_ = 0;                      // nesting of the current call
  int64_t calls_ = 0;
};

}  // namespace st::test
