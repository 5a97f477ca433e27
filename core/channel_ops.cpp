#include "core/channel_ops.h"

#include "core/emu/launch.h"
#include "core/kernels/half_math.h"

namespace st {

namespace {
// NCHW in the plain layout: the ops walk (n, c) planes of h*w contiguous elements.
void expect_nchw(const char* op, const Tensor& t) {
  ST_CHECK(t.rank() == 4 && t.layout() == Layout::Plain, op,
           ": expected a plain rank-4 tensor [N, C, H, W], got ", t.str());
}

void expect_f32(const char* op, const Tensor& t) {
  ST_CHECK(t.dtype() == DType::F32, op, ": expected float32, got ", t.str());
}

// An activation: float32, or bfloat16 (--precision bf16) where activations can be bf16,
// the CPU and the emulated device (CUDA keeps its activations float32).
void expect_activation(const char* op, const Tensor& t) {
  if (t.device().is_cuda()) return expect_f32(op, t);
  ST_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16, op,
           ": expected float32 or bfloat16, got ", t.str());
}

// Both operands of an elementwise channel op: same shape, device, activation types.
void expect_pair(const char* op, const Tensor& a, const Tensor& b) {
  expect_nchw(op, a);
  expect_activation(op, a);
  expect_activation(op, b);
  ST_CHECK(a.shape() == b.shape() && a.device() == b.device(), op, ": operands differ: ", a.str(),
           " vs ", b.str());
}

void expect_scale(const Tensor& x, const Tensor& s) {
  expect_nchw("channel_scale", x);
  expect_activation("channel_scale", x);
  expect_f32("channel_scale", s);
  ST_CHECK(s.shape() == Shape({x.dim(0), x.dim(1), 1, 1}) && s.device() == x.device(),
           "channel_scale: scale ", s.str(), " does not fit input ", x.str());
}

int64_t plane_size(const Tensor& t) {
  return t.dim(2) * t.dim(3);
}

// Element i of a host float32 or bfloat16 tensor, as float.
class Reader {
 public:
  explicit Reader(const Tensor& t)
      : f_(t.dtype() == DType::F32 ? t.f32() : nullptr),
        h_(t.dtype() == DType::BF16 ? t.bf16_in_layout() : nullptr) {}
  float operator[](int64_t i) const { return f_ ? f_[i] : half_math::bf16_to_float(h_[i]); }

 private:
  const float* f_;
  const uint16_t* h_;
};
}  // namespace

void copy_channels(Tensor& dst, int64_t dst_c0, const Tensor& src, int64_t src_c0, int64_t count) {
  expect_nchw("copy_channels", dst);
  expect_nchw("copy_channels", src);
  ST_CHECK(dst.dim(0) == src.dim(0) && dst.dim(2) == src.dim(2) && dst.dim(3) == src.dim(3) &&
               dst.dtype() == src.dtype() && dst.device() == src.device(),
           "copy_channels: operands differ beyond channels: ", dst.str(), " vs ", src.str());
  ST_CHECK(count >= 0 && dst_c0 >= 0 && src_c0 >= 0 && dst_c0 + count <= dst.dim(1) &&
               src_c0 + count <= src.dim(1),
           "copy_channels: channels [", src_c0, ", ", src_c0 + count, ") of ", src.str(), " to [",
           dst_c0, ", ", dst_c0 + count, ") of ", dst.str(), " are out of range");
  const size_t plane_bytes = static_cast<size_t>(plane_size(dst)) * dtype_size(dst.dtype());
  const size_t dst_pitch = dst.dim(1) * plane_bytes, src_pitch = src.dim(1) * plane_bytes;
  const size_t row_bytes = count * plane_bytes, rows = dst.dim(0);
  if (dst.device().is_emu()) {
    emu::launch(dst.device().index, [dst, dst_c0, src, src_c0, count]() mutable {
      Tensor d = dst.as_host_memory();
      copy_channels(d, dst_c0, src.as_host_memory(), src_c0, count);
    });
    return;
  }
  char* d = static_cast<char*>(dst.raw()) + dst_c0 * plane_bytes;
  const char* s = static_cast<const char*>(src.raw()) + src_c0 * plane_bytes;
  if (dst.device().is_cuda()) {
#ifdef SPARSETRAIN_WITH_CUDA
    cuda::copy_rows_2d(dst.device().index, d, dst_pitch, s, src_pitch, row_bytes, rows);
#endif
    return;
  }
#pragma omp parallel for schedule(static) if (rows * row_bytes > (1 << 20))
  for (size_t r = 0; r < rows; ++r)
    __builtin_memcpy(d + r * dst_pitch, s + r * src_pitch, row_bytes);
}

Tensor channel_scale(const Tensor& x, const Tensor& s) {
  expect_scale(x, s);
  // y in x's type: under bf16 the product is rounded once, as PyTorch's autocast keeps a
  // bf16 activation times a scale in bf16.
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const int64_t planes = x.dim(0) * x.dim(1), hw = plane_size(x);
  if (x.device().is_emu()) {
    emu::launch(x.device().index, [x, s, y]() mutable {
      y.as_host_memory().copy_from(channel_scale(x.as_host_memory(), s.as_host_memory()));
    });
    return y;
  }
  if (x.device().is_cuda()) {
#ifdef SPARSETRAIN_WITH_CUDA
    cuda::channel_scale(x.device().index, x.f32(), s.f32(), y.f32(), planes, hw);
#endif
    return y;
  }
  const float* ps = s.f32();
  if (x.dtype() == DType::BF16) {
    const uint16_t* px = x.bf16_in_layout();
    uint16_t* py = y.bf16_in_layout();
#pragma omp parallel for schedule(static) if (planes * hw > 32768)
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t i = p * hw; i < (p + 1) * hw; ++i)
        py[i] = half_math::float_to_bf16(half_math::bf16_to_float(px[i]) * ps[p]);
    return y;
  }
  const float* px = x.f32();
  float* py = y.f32();
#pragma omp parallel for schedule(static) if (planes * hw > 32768)
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = p * hw; i < (p + 1) * hw; ++i) py[i] = px[i] * ps[p];
  return y;
}

Tensor channel_dot(const Tensor& a, const Tensor& b) {
  expect_pair("channel_dot", a, b);
  Tensor out = Tensor::empty(Shape{a.dim(0), a.dim(1), 1, 1}, DType::F32, a.device());
  const int64_t planes = a.dim(0) * a.dim(1), hw = plane_size(a);
  if (a.device().is_emu()) {
    emu::launch(a.device().index, [a, b, out]() mutable {
      out.as_host_memory().copy_from(channel_dot(a.as_host_memory(), b.as_host_memory()));
    });
    return out;
  }
  if (a.device().is_cuda()) {
#ifdef SPARSETRAIN_WITH_CUDA
    cuda::channel_dot(a.device().index, a.f32(), b.f32(), out.f32(), planes, hw);
#endif
    return out;
  }
  float* po = out.f32();
  if (a.dtype() != DType::F32 || b.dtype() != DType::F32) {
    // bf16 operands widened, the sum in float32 in the same order.
    const Reader ra(a), rb(b);
#pragma omp parallel for schedule(static) if (planes * hw > 32768)
    for (int64_t p = 0; p < planes; ++p) {
      float sum = 0.0f;
      for (int64_t i = p * hw; i < (p + 1) * hw; ++i) sum += ra[i] * rb[i];
      po[p] = sum;
    }
    return out;
  }
  const float* pa = a.f32();
  const float* pb = b.f32();
#pragma omp parallel for schedule(static) if (planes * hw > 32768)
  for (int64_t p = 0; p < planes; ++p) {
    float sum = 0.0f;
    for (int64_t i = p * hw; i < (p + 1) * hw; ++i) sum += pa[i] * pb[i];
    po[p] = sum;
  }
  return out;
}

}  // namespace st
