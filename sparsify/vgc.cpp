#include "sparsify/vgc.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "sparsify/registry.h"

namespace st {

Vgc::Vgc(const SpValues& v)
    : alpha_(v.get("alpha")),
      zeta_(v.get("zeta")),
      tau_(v.get("tau")),
      batch_(v.get_int("batch")) {}

Vgc::Vgc(const SparsifierOptions& o) : Vgc(sp_values("vgc", o)) {}

int Vgc::index_bits(int64_t n) {
  int b = 1;
  while ((int64_t{1} << b) < n) ++b;
  return b;
}

void sq_grad_fallback(const float* g, int64_t n, int64_t batch, float* out) {
  const float inv = 1.0f / static_cast<float>(batch);
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] * g[i] * inv;
}

void Vgc::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                    DeviceSelection& out) {
  bulk::MethodOps& passes = bulk::need<bulk::MethodOps>(ops, name());
  const int64_t n = x.size();
  ST_CHECK(n <= (int64_t{1} << 29), "vgc: bucket of ", n,
           " elements exceeds the 2^29 its 32-bit (index, value) words can address; use a "
           "smaller --bucket-cap-mb");
  ST_CHECK(ctx.aux_buffer || ctx.grad_buffer,
           "vgc: neither per-sample squared-gradient sums nor the raw gradient given");
  DeviceState& v = v_[ctx.bucket];
  v.bind(ops, n);
  // v += s / B^2, the send test, reset / decay; indices ascending.
  const float scale =
      passes.vgc_test(x, ctx.aux_buffer, ctx.aux_buffer ? nullptr : ctx.grad_buffer,
                      1.0f / static_cast<float>(batch_), static_cast<float>(alpha_),
                      static_cast<float>(zeta_), static_cast<float>(tau_), v.buf(), out.indices);
  if (out.indices.empty()) {
    ops.resize(out.values, bulk::Elem::F32, 0);
    ops.resize(out.packed, bulk::Elem::U32, 0);
    return;
  }
  passes.vgc_pack(x, out.indices, scale, index_bits(n), out.packed, out.values);
  out.threshold = scale;
}

void Vgc::unpack_on(bulk::Ops& ops, const SelectContext&, int64_t n, const bulk::Buffer& words,
                    int64_t offset, int64_t count, DeviceSelection& out) const {
  bulk::MethodOps& passes = bulk::need<bulk::MethodOps>(ops, name());
  if (count == 0) {
    ops.resize(out.indices, bulk::Elem::I32, 0);
    ops.resize(out.values, bulk::Elem::F32, 0);
    return;
  }
  passes.vgc_unpack(words, offset, count, index_bits(n), out.indices, out.values);
}

SqGradients::SqGradients(FlatParams& flat, int64_t batch_per_rank)
    : flat_(flat), batch_(batch_per_rank) {
  ST_CHECK(batch_ >= 1, "SqGradients: batch size must be >= 1, got ", batch_);
  ST_CHECK(flat.grads().device().is_cpu(),
           "variance-based compression needs CPU gradients (per-sample squared-gradient sums "
           "are computed by the CPU layers); got ",
           flat.grads().str());
  flat_sq_ = Tensor::zeros({flat.numel()});
  for (Param* p : flat.params())
    if (p->provides_sq_grad) p->sq_grad = flat_sq_.slice_flat(flat.offset(*p), p->grad.shape());
}

SqGradients::~SqGradients() {
  for (Param* p : flat_.params()) p->sq_grad = Tensor();
}

Tensor SqGradients::bucket(const Bucket& b) {
  Tensor slice = flat_sq_.slice_flat(b.offset, Shape{b.numel});
  for (const Param* p : b.params)
    if (!p->provides_sq_grad)
      sq_grad_fallback(p->grad.f32(), p->grad.numel(), batch_,
                       slice.f32() + (flat_.offset(*p) - b.offset));
  return slice;
}

void Vgc::save_state(StateWriter& out) const {
  out.put_buckets(v_, [](StateWriter& w, const DeviceState& v) { v.save(w); });
}

void Vgc::load_state(StateReader& in) {
  in.get_buckets(v_, [](StateReader& r, DeviceState& v) { v.load(r); });
}

}  // namespace st
