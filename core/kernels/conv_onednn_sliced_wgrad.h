// bf16 convolution weight gradients computed one batch slice per thread, for OneDnnConv.
//
// Why not oneDNN's own threading: its bf16 backward-weights kernel (avx512_core_bf16, the
// oneDNN 2.6 that Debian ships) reduces the threads' partial sums behind spin barriers.
// When another process or thread holds one of the cores (ranks sharing a node's cores),
// the thread that reached a barrier spins through whole time slices: ResNet-20's bf16
// backward took about 7x fp32's with 2 ranks x 2 threads on 2 cores (docs/RESULTS.md,
// "bf16 where cores are shared"). So where the process's threads share the node's cores
// with other ranks (core/parallel.h, cores_shared()), every thread runs a one-thread
// primitive on its own contiguous slice of the batch into its own gradient buffer, and the
// slices' sums are added in thread order afterwards: no thread waits for another inside
// the kernel, and the result does not depend on scheduling.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/kernels/conv_onednn.h"

namespace st::cpu {

class SlicedWeightGrad {
 public:
  SlicedWeightGrad(int64_t batch, int64_t out_channels, const ConvGeometry& g, bool bias,
                   ConvDTypes io = {});
  ~SlicedWeightGrad();
  SlicedWeightGrad(const SlicedWeightGrad&) = delete;
  SlicedWeightGrad& operator=(const SlicedWeightGrad&) = delete;

  // dw += dL/dw, db += dL/db (when bias) from x and dy (in `layouts`, of the types `io`
  // gave), over `threads` slices of the batch (at most one per image).
  void run(const void* x, const void* dy, float* dw, float* db, const ConvLayouts& layouts,
           int threads);

 private:
  struct Worker;
  int64_t batch_, out_channels_;
  ConvGeometry g_;
  bool bias_;
  ConvDTypes io_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace st::cpu
