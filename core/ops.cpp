#include "core/ops.h"

#include "core/emu/launch.h"
#include "core/kernels/half.h"
#include "core/kernels/half_math.h"
#include "core/layout.h"

namespace st {

namespace {
void check_same(const char* op, const Tensor& a, const Tensor& b) {
  ST_CHECK(a.shape() == b.shape() && a.device() == b.device(), op, ": operands differ: ", a.str(),
           " vs ", b.str());
}
}  // namespace

void copy_async(Tensor& dst, const Tensor& src) {
  check_same("copy_async", dst, src);
  ST_CHECK(dst.dtype() == src.dtype(), "copy_async: operands differ: ", dst.str(), " vs ",
           src.str());
  if (dst.device().is_cuda()) {
#ifdef SPARSETRAIN_WITH_CUDA
    cuda::copy_async(dst.device().index, dst.raw(), src.raw(), dst.nbytes());
#endif
    return;
  }
  if (dst.device().is_emu()) {
    emu::launch(dst.device().index,
                [dst, src]() mutable { dst.as_host_memory().copy_from(src.as_host_memory()); });
    return;
  }
  dst.copy_from(src);
}

void add_inplace(Tensor& dst, const Tensor& src) {
  check_same("add_inplace", dst, src);
  // Elementwise: any layout, as long as both have it.
  if (src.layout() != dst.layout()) return add_inplace(dst, to_layout(src, dst.layout()));
  if (dst.device().is_emu()) {
    emu::launch(dst.device().index, [dst, src]() mutable {
      Tensor d = dst.as_host_memory();
      add_inplace(d, src.as_host_memory());
    });
    return;
  }
  if (src.dtype() != dst.dtype()) return add_inplace(dst, cpu::to_dtype(src, dst.dtype()));
  const int64_t n = dst.numel();
  if (dst.dtype() == DType::BF16) {  // the sum rounded once, as a bfloat16 tensor holds it
    uint16_t* d = dst.bf16_in_layout();
    const uint16_t* s = src.bf16_in_layout();
#pragma omp parallel for simd if (n > 32768) schedule(static)
    for (int64_t i = 0; i < n; ++i)
      d[i] =
          half_math::float_to_bf16(half_math::bf16_to_float(d[i]) + half_math::bf16_to_float(s[i]));
    return;
  }
  float* d = dst.f32_in_layout();
  const float* s = src.f32_in_layout();
  if (dst.device().is_cuda()) {
#ifdef SPARSETRAIN_WITH_CUDA
    cuda::add_inplace(dst.device().index, d, s, n);
#endif
    return;
  }
#pragma omp parallel for simd if (n > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i) d[i] += s[i];
}

Tensor add(const Tensor& a, const Tensor& b) {
  check_same("add", a, b);
  Tensor out = a.clone();
  add_inplace(out, b);
  return out;
}

void scale_inplace(Tensor& x, float alpha) {
  if (x.device().is_emu()) {
    emu::launch(x.device().index, [x, alpha]() mutable {
      Tensor h = x.as_host_memory();
      scale_inplace(h, alpha);
    });
    return;
  }
  const int64_t n = x.numel();
  float* p = x.f32();
  if (x.device().is_cuda()) {
#ifdef SPARSETRAIN_WITH_CUDA
    cuda::scale_inplace(x.device().index, p, alpha, n);
#endif
    return;
  }
#pragma omp parallel for simd if (n > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] *= alpha;
}

double sum_squares(const Tensor& x) {
  if (x.device().is_emu())
    return emu::launch_and_wait(x.device().index, [&x] { return sum_squares(x.as_host_memory()); });
  const int64_t n = x.numel();
  const float* p = x.f32();
  if (x.device().is_cuda()) {
#ifdef SPARSETRAIN_WITH_CUDA
    return cuda::sum_squares(x.device().index, p, n);
#endif
  }
  // simd: the double sum in vector lanes (a serial chain of double adds took 2% of an
  // LSTM step in its gradient-norm clip).
  double s = 0;
#pragma omp parallel for simd reduction(+ : s) if (n > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(p[i]) * p[i];
  return s;
}

double sum_squares(const std::vector<Tensor>& xs) {
  if (!xs.empty() && xs.front().device().is_emu()) {
    // One wait for all of them, as the CUDA form's single copy to the host.
    return emu::launch_and_wait(xs.front().device().index, [&xs] {
      double s = 0;
      for (const Tensor& x : xs) s += sum_squares(x.as_host_memory());
      return s;
    });
  }
  if (xs.empty() || xs.front().device().is_cpu()) {
    double s = 0;
    for (const Tensor& x : xs) s += sum_squares(x);
    return s;
  }
  const Device device = xs.front().device();
  std::vector<const float*> ptrs;
  std::vector<int64_t> ns;
  for (const Tensor& x : xs) {
    ST_CHECK(x.device() == device, "sum_squares: tensors on ", device.str(), " and ",
             x.device().str());
    ptrs.push_back(x.f32());
    ns.push_back(x.numel());
  }
  double s = 0;
#ifdef SPARSETRAIN_WITH_CUDA
  for (double v : cuda::sum_squares_each(ptrs, ns, device.index)) s += v;
#endif
  return s;
}

}  // namespace st
