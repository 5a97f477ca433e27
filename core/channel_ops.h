// Device-generic ops over the channel axis of NCHW tensors (plain layout), for the
// containers that split, join or rescale channels: Inception's concatenation of parallel
// branches (Szegedy et al. 2015) and the squeeze-and-excitation scale (Hu et al. 2018).
// Each dispatches on the tensor's device like core/ops.h: OpenMP loops on the CPU, a task
// on the emulated device's current stream, CUDA on the current stream.
#pragma once

#include "core/tensor.h"

namespace st {

// dst[:, dst_c0 + i] = src[:, src_c0 + i] for i < count: same batch, height and width, same
// dtype, same device. Concatenation writes each branch at its offset; the backward reads
// each branch's slice back.
void copy_channels(Tensor& dst, int64_t dst_c0, const Tensor& src, int64_t src_c0, int64_t count);
// y[n, c, h, w] = x[n, c, h, w] * s[n, c] with s of shape [N, C, 1, 1] (float32); y has
// x's type, float32 or (CPU and emulated device) bfloat16, computed in float32 and
// rounded once.
Tensor channel_scale(const Tensor& x, const Tensor& s);
// out[n, c] = sum over h, w of a[n, c, h, w] * b[n, c, h, w], shape [N, C, 1, 1] (float32);
// the operands float32 or (CPU and emulated device) bfloat16, widened; the sum runs in
// row-major order on every backend.
Tensor channel_dot(const Tensor& a, const Tensor& b);

#ifdef SPARSETRAIN_WITH_CUDA
namespace cuda {
// `rows` rows of `row_bytes` bytes, strided by the pitches (one row per image).
void copy_rows_2d(int device, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                  size_t row_bytes, size_t rows);
void channel_scale(int device, const float* x, const float* s, float* y, int64_t planes,
                   int64_t plane_size);
void channel_dot(int device, const float* a, const float* b, float* out, int64_t planes,
                 int64_t plane_size);
}  // namespace cuda
#endif

}  // namespace st
