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
// at the next call. The guard tests compare a run on GuardedOps with one on CpuOps bit
// for bit.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <vector>

#include "sparsify/bulk/cpu_ops.h"

namespace st::test {

class GuardedOps : public bulk::Ops {
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
  // Restores the given buffers' allocations on construction; saves and poisons them (and
  // whatever they point to after the call) on destruction.
  class Scope {
   public:
    Scope(GuardedOps& g, std::initializer_list<const Buffer*> bufs);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    GuardedOps& g_;
    std::vector<const Buffer*> bufs_;
    std::vector<Alloc*> restored_;
  };

  // The allocation holding b's memory, registered on first sight (null: no memory).
  Alloc* find(const Buffer& b);
  static void poison(Tensor& t);

  bulk::CpuOps inner_;
  std::map<uintptr_t, Alloc> allocs_;  // by base address
  int64_t calls_ = 0;
};

}  // namespace st::test
