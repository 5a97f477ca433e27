// bulk::Ops on the CPU: the OpenMP kernels of sparsify/kernels/*_cpu.* and the loops the
// exchange patterns always ran, on buffers that are plain 64-byte aligned host tensors.
// A bucket tensor is wrapped without a copy, so routing the CPU path through the
// interface costs a virtual call per pass, not a pass.
//
// Results are deterministic and independent of the thread count: selections come out
// ascending (per-thread pieces joined in thread order), sums run over fixed blocks, and
// scatters run in index order.
#pragma once

#include <functional>
#include <vector>

#include "sparsify/bulk/bulk_ops.h"

namespace st::bulk {

class CpuOps : ST_BULK_FAMILIES(ST_BULK_PUBLIC_BASE) public Ops {
 public:
  Device device() const override { return Device::cpu(); }
  const char* name() const override { return "cpu"; }
  ST_BULK_FAMILIES(ST_BULK_PROVIDE)
  // Every operation of op_list.h: the core in core_cpu.cpp, each family in <family>_cpu.cpp.
  ST_BULK_ALL_OPS(ST_BULK_DECLARE_OVERRIDE)

 private:
  std::vector<std::vector<int32_t>> block_hits_;  // exceed_compact: each block's hits
  // quantize() of TernGrad and EF-signSGD: block sums, scales, codes and values.
  void scaled_groups(const QuantSpec& q, const float* x, int64_t n, float* scales, uint32_t* codes,
                     float* values);
  struct FftCache;                 // FFTW plans by length (transform_cpu.cpp)
  std::shared_ptr<FftCache> fft_;  // made on the first transform

 protected:
  // Where a buffer's elements are (null when it has no storage yet). Every pass reaches
  // buffer memory through this one call (f32 / i32 below), so a checking implementation
  // can watch each access.
  virtual void* memory(const Buffer& b);
  float* f32(Buffer& b) { return static_cast<float*>(memory(b)); }
  const float* f32(const Buffer& b) { return static_cast<const float*>(memory(b)); }
  int32_t* i32(Buffer& b) { return static_cast<int32_t*>(memory(b)); }
  const int32_t* i32(const Buffer& b) { return static_cast<const int32_t*>(memory(b)); }
  // A tensor viewing exactly the buffer's size() elements (collectives); no memory access.
  Tensor view(const Buffer& b);
  // Runs a collective `op` on the buffers' tensor views (`inputs` read, `outputs` read and
  // written): in place here; an implementation whose memory the communicator cannot
  // take stages them (the emulated device's kernels).
  virtual void on_comm_tensors(Communicator& comm, const std::vector<Tensor*>& inputs,
                               const std::vector<Tensor*>& outputs,
                               const std::function<void()>& op);
  // Copies a selection kernel's output into `out` (I32).
  void put_indices(const std::vector<int32_t>& v, Buffer& out);

 private:
  std::vector<int32_t> scratch_, scratch2_;  // kernel outputs before they land in a Buffer
  std::vector<uint8_t> marker_;              // union_of: one flag per position, zero between uses
};

}  // namespace st::bulk
