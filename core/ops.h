// Device-generic tensor ops used by containers and optimisers. Each dispatches on the
// tensor's device; CPU loops are OpenMP-parallel, CUDA versions live in core/cuda/ops.cu.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace st {

// dst = src (same shape, dtype and device). On CUDA the copy is queued on the current
// stream and the host does not wait (Tensor::copy_from, which may cross devices, does).
void copy_async(Tensor& dst, const Tensor& src);
// dst += src (same shape and device; src is converted to dst's layout and dtype, float32
// or bfloat16 on the host).
void add_inplace(Tensor& dst, const Tensor& src);
// dst = a + b.
Tensor add(const Tensor& a, const Tensor& b);
// x *= alpha.
void scale_inplace(Tensor& x, float alpha);
// Sum of squares, accumulated in double (for gradient-norm clipping and tests).
double sum_squares(const Tensor& x);
// The sum of sum_squares(x) over `xs` (all on one device), added in order. On CUDA the
// per-tensor reductions queue on the current stream and ONE copy brings all of them to
// the host, so a norm over every gradient of a model waits for the device once.
double sum_squares(const std::vector<Tensor>& xs);

#ifdef SPARSETRAIN_WITH_CUDA
namespace cuda {
// `device` is the operands' GPU, which the caller knows from its tensors (asking the
// driver per pointer would cost a cudaPointerGetAttributes call per op).
void copy_async(int device, void* dst, const void* src, size_t bytes);
void add_inplace(int device, float* dst, const float* src, int64_t n);
void scale_inplace(int device, float* x, float alpha, int64_t n);
double sum_squares(int device, const float* x, int64_t n);
// Per-tensor sums of squares of xs[i] (ns[i] floats) on device `device`, in one round trip.
std::vector<double> sum_squares_each(const std::vector<const float*>& xs,
                                     const std::vector<int64_t>& ns, int device);
}  // namespace cuda
#endif

}  // namespace st
