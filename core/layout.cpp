#include "core/layout.h"

#include "core/emu/launch.h"

namespace st {

bool blockable16(const Tensor& t) {
  return t.rank() == 4 && (t.dtype() == DType::F32 || t.dtype() == DType::BF16) &&
         t.dim(1) % 16 == 0 && !t.device().is_cuda();
}

namespace {
// A transposition of 16 channels: (n, c, hw) <-> (n, c / 16, hw, c % 16). Written here
// rather than as a oneDNN reorder so that it also runs on an emulated device's stream,
// whose kernels are host loops over its memory.
template <class T>
void convert(const T* in, T* out, int64_t n, int64_t c, int64_t hw, bool to_blocked) {
  const int64_t blocks = c / 16;
#pragma omp parallel for collapse(2) schedule(static) if (n * c * hw > 32768)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t base = (i * blocks + b) * hw * 16;  // same start in both layouts
      for (int64_t p = 0; p < hw; ++p)
        for (int64_t l = 0; l < 16; ++l) {
          const int64_t plain = base + l * hw + p, blocked = base + p * 16 + l;
          if (to_blocked)
            out[blocked] = in[plain];
          else
            out[plain] = in[blocked];
        }
    }
}
}  // namespace

Tensor to_layout(const Tensor& t, Layout layout) {
  if (t.layout() == layout) return t;
  ST_CHECK(blockable16(t), "to_layout: ", t.str(), " cannot change between plain and blocked");
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device()).with_layout(layout);
  const bool to_blocked = layout == Layout::Blocked16;
  auto run = [t, out, to_blocked]() mutable {
    const Tensor src = t.device().is_emu() ? t.as_host_memory() : t;
    Tensor dst = out.device().is_emu() ? out.as_host_memory() : out;
    const int64_t n = t.dim(0), c = t.dim(1), hw = t.dim(2) * t.dim(3);
    if (t.dtype() == DType::BF16)
      convert(src.bf16_in_layout(), dst.bf16_in_layout(), n, c, hw, to_blocked);
    else
      convert(src.f32_in_layout(), dst.f32_in_layout(), n, c, hw, to_blocked);
  };
  if (t.device().is_emu())
    emu::launch(t.device().index, run);
  else
    run();
  return out;
}

}  // namespace st
