#include "sparsify/signsgd.h"

#include "core/error.h"

namespace st {

using bulk::Elem;

namespace {
constexpr char kPerTensor[] =
    "per_tensor";  // spelled once: keys() declares it, the constructor reads it
}  // namespace

std::vector<SpKey> SignSgd::keys() {
  return {flag(kPerTensor, true, "one scale per tensor, as the reference code (off: per bucket)")};
}

SignSgd::SignSgd(const SpValues& v) : per_tensor_(v.get_bool(kPerTensor)) {}

std::vector<int64_t> SignSgd::groups(const SelectContext& ctx) const {
  if (per_tensor_ && !ctx.segments.empty()) return ctx.segments;
  return {0};
}

bulk::QuantSpec SignSgd::spec(const SelectContext& ctx) const {
  bulk::QuantSpec q;
  q.kind = bulk::QuantKind::Sign;
  q.starts = groups(ctx);
  return q;
}

// Wire format: one float32 scale word per group, then n sign bits, bit i of word
// groups + i / 32 set when element i is negative. sign(0) goes out as +1 (one bit has
// no zero); error feedback keeps the difference.
void SignSgd::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                        DeviceSelection& out) {
  bulk::QuantOps& quantizer = bulk::need<bulk::QuantOps>(ops, name());
  const int64_t n = x.size();
  const bulk::QuantSpec q = spec(ctx);
  const int64_t G = static_cast<int64_t>(q.starts.size());
  quantizer.quantize(q, x, scales_, codes_, out.values);
  ops.resize(out.packed, Elem::U32, G + (n + 31) / 32);
  ops.copy(scales_, 0, out.packed, 0, G);
  quantizer.pack_bits(codes_, 1, out.packed, G);
  ops.iota(out.indices, n, 0);
  out.threshold = 0;
}

void SignSgd::unpack_on(bulk::Ops& ops, const SelectContext& ctx, int64_t n,
                        const bulk::Buffer& words, int64_t offset, int64_t count,
                        DeviceSelection& out) const {
  bulk::QuantOps& quantizer = bulk::need<bulk::QuantOps>(ops, name());
  const bulk::QuantSpec q = spec(ctx);
  const int64_t G = static_cast<int64_t>(q.starts.size());
  ST_CHECK(count == G + (n + 31) / 32, "signsgd: packed message has ", count, " words, expected ",
           G + (n + 31) / 32);
  quantizer.unpack_bits(words, offset + G, n, 1, codes_);
  quantizer.dequantize(q, codes_, words, offset, out.values);
  ops.iota(out.indices, n, 0);
}

}  // namespace st
