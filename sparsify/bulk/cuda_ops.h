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
#include "sparsify/kernels/fft_cuda.h"

namespace st::bulk {

class CudaOps : ST_BULK_FAMILIES(ST_BULK_PUBLIC_BASE) public Ops {
 public:
  // `device` must be a CUDA device; throws with one line naming it otherwise.
  explicit CudaOps(Device device);
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  Device device() const override { return device_; }
  const char* name() const override { return "cuda"; }
  ST_BULK_FAMILIES(ST_BULK_PROVIDE)
  // Every operation of op_list.h: the core in core_cuda.cu, core_select_cuda.cu and
  // core_comm_cuda.cu, each family in <family>_cuda.cu.
  ST_BULK_ALL_OPS(ST_BULK_DECLARE_OVERRIDE)

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
  // Where a buffer's elements are on the device (run_pass).
  static void* device_address(const Buffer& b);
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
