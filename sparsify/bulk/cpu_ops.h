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

  // --- Threshold-family extras (sp1; defined in cpu_ops_threshold.cpp) ---

  // --- Quantisation, transforms, dense algebra (sp2; defined in cpu_ops_quant.cpp) ---

 protected:
  // The typed memory of a buffer (null when it has no storage yet).
  static float* f32(Buffer& b);
  static const float* f32(const Buffer& b);
  static int32_t* i32(Buffer& b);
  static const int32_t* i32(const Buffer& b);
  // A tensor viewing exactly the buffer's size() elements (collectives).
  static Tensor view(const Buffer& b);
  // Copies a selection kernel's output into `out` (I32).
  void put_indices(const std::vector<int32_t>& v, Buffer& out);

 private:
  std::vector<int32_t> scratch_, scratch2_;  // kernel outputs before they land in a Buffer
  std::vector<uint8_t> marker_;              // union_of: one flag per position, zero between uses
};

}  // namespace st::bulk
