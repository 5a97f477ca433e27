// Bulk passes over bucket data, behind one device interface.
//
// A sparsifier decides small things (thresholds, partitions, stage counts, k) from a few
// scalars on the host, identically on every rank; everything that walks over a bucket
// (statistics, compaction, top-k, gather/scatter, quantisation, transforms) and every
// collective on bucket data is a call on bulk::Ops. The CPU implementation runs today's
// OpenMP kernels; the CUDA implementation runs CUB/cuFFT/cuBLAS and its own kernels on the
// bucket's stream, with collectives on the communication stream. Sparsifiers and the
// exchange patterns in SparsifyHook never read or write a Buffer's memory themselves, so
// the CPU tests run every line of orchestration the GPU runs; a guarded implementation
// (tests) poisons buffer memory between calls to prove it.
//
// Per-element formulas shared by the CPU and CUDA implementations live in ST_HD headers
// (sparsify/partition_math.h, sparsify/quantizers.h, ...), not here.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "sparsify/partition_math.h"

namespace st {
class Communicator;
}

namespace st::bulk {

enum class Elem : uint8_t { F32, I32, U32 };

// A buffer on the implementation's device: `size()` elements of one type. Only bulk::Ops
// implementations reach its memory; everyone else passes it around. Buffers keep their
// capacity when resized smaller, so per-bucket scratch does not reallocate each step.
class Buffer {
 public:
  Buffer() = default;
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Elem elem() const { return elem_; }

 private:
  friend class Ops;
  Tensor storage_;  // capacity >= size_; F32 or I32 tensor on the device
  int64_t size_ = 0;
  Elem elem_ = Elem::F32;
};

// Sums over a range, accumulated in double: one pass.
struct Stats {
  int64_t count = 0;
  double sum = 0, sum_sq = 0, abs_sum = 0;
  float abs_max = 0;
};

// Smallest and largest entry of an index buffer (Ops::index_bounds).
struct IndexBounds {
  int64_t min = 0, max = -1;
};

// The interface. Ranges are [begin, end) inside the buffer; indices are int32 positions
// in the buffer they refer to. Every call may return before the device has finished,
// except those that return host values (they wait).
class Ops {
 public:
  virtual ~Ops() = default;
  virtual Device device() const = 0;
  // A short name for logs and test output ("cpu", "cuda", "guarded-cpu").
  virtual const char* name() const = 0;

  // --- Memory ---
  // Sizes `b` for n elements of `e` (contents unspecified, capacity kept).
  virtual void resize(Buffer& b, Elem e, int64_t n) = 0;
  // A buffer viewing a bucket tensor (F32, on this device). release() must be called
  // before the tensor is used again outside bulk::Ops (the guarded implementation
  // writes its shadow back there).
  virtual Buffer wrap(Tensor& t) = 0;
  virtual void release(Buffer& wrapped) = 0;
  // Host <-> buffer copies of n elements; for scalars, samples and small index lists.
  virtual void upload(const void* host, Elem e, int64_t n, Buffer& out) = 0;
  virtual void download(const Buffer& b, int64_t begin, int64_t n, void* host) = 0;
  virtual void copy(const Buffer& src, int64_t src_begin, Buffer& dst, int64_t dst_begin,
                    int64_t n) = 0;
  virtual void fill(Buffer& b, part::Range r, float v) = 0;      // F32
  virtual void iota(Buffer& out, int64_t n, int32_t start) = 0;  // I32: start, start+1, ...

  // --- Element-wise ---
  virtual void axpy(float a, const Buffer& x, part::Range r, Buffer& y) = 0;  // y += a x
  virtual void scale(Buffer& y, part::Range r, float a) = 0;                  // y *= a

  // --- Statistics (host values; the call waits) ---
  virtual Stats stats(const Buffer& x, part::Range r) = 0;
  // Count of |x| >= tau (|x| > tau when `strict`) in r.
  virtual int64_t count_abs(const Buffer& x, part::Range r, float tau, bool strict) = 0;

  // --- Selection (indices ascending, positions in x; the count is out.size()) ---
  // |x| >= tau (> when strict) in r.
  virtual void select_abs(const Buffer& x, part::Range r, float tau, bool strict, Buffer& out) = 0;
  // MiCRO/ExDyna compare (part::passes) in `owned`; when nothing passes, the single
  // position part::fallback_index(owned, t).
  virtual void threshold_select(const Buffer& x, part::Range owned, float tau, int64_t t,
                                Buffer& out) = 0;
  // Exact top-k by |x| in r, ties to the lower index; returns the k-th largest |x|.
  virtual float topk_abs(const Buffer& x, part::Range r, int64_t k, Buffer& out) = 0;
  // The same restricted to `candidates` (ascending positions in x).
  virtual float topk_abs_among(const Buffer& x, const Buffer& candidates, int64_t k,
                               Buffer& out) = 0;

  // --- Gather / scatter (idx: I32 positions in the F32 buffer they address) ---
  virtual void gather(const Buffer& x, const Buffer& idx, Buffer& out) = 0;  // out[j]=x[idx[j]]
  virtual void scatter_add(const Buffer& idx, const Buffer& vals, Buffer& y) = 0;
  // y[idx[j]] = a * vals[j]
  virtual void scatter_scaled(const Buffer& idx, const Buffer& vals, float a, Buffer& y) = 0;
  virtual void zero_at(const Buffer& idx, Buffer& y) = 0;
  // The distinct positions of `all` (I32, ranks' segments at offsets[r] with counts[r]
  // entries, positions < domain), in an order that depends only on `all`, so it is the
  // same on every rank.
  virtual void union_of(const Buffer& all, const std::vector<int64_t>& offsets,
                        const std::vector<int64_t>& counts, int64_t domain, Buffer& out) = 0;

  // --- Collectives on buffers (the communicator decides MPI or NCCL) ---
  virtual void allreduce_sum(Communicator& comm, Buffer& b) = 0;
  // out = the ranks' `in` concatenated in rank order; counts[r] = rank r's in.size().
  virtual void allgatherv(Communicator& comm, const Buffer& in, const std::vector<int64_t>& counts,
                          Buffer& out) = 0;
  virtual void broadcast(Communicator& comm, Buffer& b, int root) = 0;

  // A buffer aliasing n elements of b from `begin` (tensor-scope selection runs on one
  // tensor of the bucket at a time).
  virtual Buffer slice(const Buffer& b, int64_t begin, int64_t n) = 0;

  // Method-specific bulk passes (quantisers, SIDCo's stage moments, transforms, dense
  // algebra) follow in their own sections below, each with its per-element formula in
  // an ST_HD header.

  // --- Exchange extras (what SparsifyHook's patterns need beyond the calls above) ---
  // out = the ranks' `in` concatenated in rank order; every rank passes the same
  // in.size() (the union pattern's index gather, padded to the largest count).
  virtual void allgather(Communicator& comm, const Buffer& in, Buffer& out) = 0;
  // y[idx[j]] += a * vals[j] for j = 0, 1, ... in that order (repeated positions add up
  // in index order, so the result is bit-exact across implementations). With a = -1 this
  // takes a rank's own contribution out of its residual: x - v exactly.
  virtual void scatter_axpy(float a, const Buffer& idx, const Buffer& vals, Buffer& y) = 0;
  // idx[j] += delta for every entry (I32): positions in a tensor of a bucket become
  // positions in the bucket.
  virtual void offset_indices(Buffer& idx, int32_t delta) = 0;
  // The smallest and largest entry of an I32 buffer (host values; the call waits). An
  // empty buffer gives {0, -1}. The hook checks received positions with it.
  virtual IndexBounds index_bounds(const Buffer& idx) = 0;
  // Do a and b hold the same elements, bit for bit (same size and type)? Host value.
  virtual bool same_bits(const Buffer& a, const Buffer& b) = 0;
  // For the `count` positions of idx from `begin` (I32): how many fall in each segment
  // [segments[j], segments[j+1]) (the last one open-ended); segments ascending, starting
  // at 0. Host values (tensor scope's per-tensor feedback).
  virtual std::vector<int64_t> segment_counts(const Buffer& idx, int64_t begin, int64_t count,
                                              const std::vector<int64_t>& segments) = 0;

 protected:
  // Implementations reach memory through these (a Buffer's size is in elements).
  static Tensor& storage(Buffer& b) { return b.storage_; }
  static const Tensor& storage(const Buffer& b) { return b.storage_; }
  static void set_size(Buffer& b, Elem e, int64_t n) {
    b.elem_ = e;
    b.size_ = n;
  }
  static void set_storage(Buffer& b, Tensor t) { b.storage_ = std::move(t); }
};

using OpsPtr = std::unique_ptr<Ops>;

// The implementation for a device: CPU kernels, or CUDA on `device` (throws with one line
// when this build has no CUDA backend).
OpsPtr make_ops(Device device);
// The CUDA implementation (sparsify/bulk/cuda_ops.cu); a build without the CUDA backend
// defines it in sparsify/bulk/cuda_ops_disabled.cpp, where it throws.
OpsPtr make_cuda_ops(Device device);

}  // namespace st::bulk
