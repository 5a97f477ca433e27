#include "sparsify/vgc.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace st {

namespace {
// The --sp keys, spelled once: keys() declares them, the constructor reads them.
constexpr char kAlpha[] = "alpha", kZeta[] = "zeta", kTau[] = "tau", kBatch[] = "batch";
}  // namespace

std::vector<SpKey> Vgc::keys() {
  return {real(kAlpha, 1.5, "(0, inf)", "send when r^2 > alpha v (the paper: 1 to 2)"),
          real(kZeta, 0.999, "(0, 1]", "decay of unsent variance"),
          real(kTau, 0, "[0, inf)", "optional threshold on |r| (0 = off)"),
          whole(kBatch, 32, "[1, inf)", "B when the layers give no per-sample sums")};
}

Vgc::Vgc(const SpValues& v)
    : alpha_(v.get(kAlpha)), zeta_(v.get(kZeta)), tau_(v.get(kTau)), batch_(v.get_int(kBatch)) {}

Vgc::Vgc(const SparsifierOptions& o) : Vgc(SpValues(kName, keys(), o.params)) {}

int Vgc::index_bits(int64_t n) {
  int b = 1;
  while ((int64_t{1} << b) < n) ++b;
  return b;
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

void Vgc::save_state(StateWriter& out) const {
  out.put_buckets(v_, [](StateWriter& w, const DeviceState& v) { v.save(w); });
}

void Vgc::load_state(StateReader& in) {
  in.get_buckets(v_, [](StateReader& r, DeviceState& v) { v.load(r); });
}

}  // namespace st
