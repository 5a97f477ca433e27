#include "sparsify/quantizers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/rng.h"

namespace st::quant {

namespace {

int floor_log2(float a) {
  int e;
  std::frexp(a, &e);
  return e - 1;
}

int ceil_log2(int64_t v) {  // smallest b with 2^b >= v
  int b = 0;
  while ((int64_t{1} << b) < v) ++b;
  return b;
}

}  // namespace

RangeFloat range_float_format(float max_abs, float min_abs, int width) {
  ST_CHECK(width >= 2 && width <= 24, "range-based float: width must be in [2, 24], got ", width);
  RangeFloat f;
  f.width = width;
  if (!(max_abs > 0)) {  // all zero: any format encodes 0 exactly
    f.exp_bits = 1;
    f.man_bits = width - 2;
    return f;
  }
  if (!(min_abs > 0) || min_abs > max_abs) min_abs = max_abs;
  const int top = floor_log2(max_abs), bottom = floor_log2(min_abs);
  const int binades = top - bottom + 1;
  f.exp_bits = std::max(1, ceil_log2(binades + 1));  // fields 1..binades, 0 = subnormal
  if (f.exp_bits > width - 1) {
    // Too wide a range for the width: keep the top binades, mantissa 0.
    f.exp_bits = width - 1;
    f.man_bits = 0;
    f.exp0 = top - ((1 << f.exp_bits) - 2);
  } else {
    f.man_bits = width - 1 - f.exp_bits;
    f.exp0 = bottom;
  }
  return f;
}

uint32_t range_float_pack(const RangeFloat& f) {
  return static_cast<uint32_t>(f.width) | static_cast<uint32_t>(f.exp_bits) << 5 |
         static_cast<uint32_t>(f.man_bits) << 10 | static_cast<uint32_t>(f.exp0 + 1024) << 15;
}

RangeFloat range_float_unpack(uint32_t w) {
  RangeFloat f;
  f.width = static_cast<int>(w & 31u);
  f.exp_bits = static_cast<int>((w >> 5) & 31u);
  f.man_bits = static_cast<int>((w >> 10) & 31u);
  f.exp0 = static_cast<int>((w >> 15) & 2047u) - 1024;
  ST_CHECK(f.width >= 2 && f.width <= 24 && f.exp_bits + f.man_bits + 1 == f.width,
           "range-based float: corrupt format word ", w);
  return f;
}

int64_t words_for_bits(int64_t bits) {
  return (bits + 31) / 32;
}

}  // namespace st::quant

namespace st {

using bulk::Elem;

namespace {

void check_words(const std::string& who, int64_t words, int64_t want) {
  ST_CHECK(words == want, who, ": packed message has ", words, " words, expected ", want);
}

// Scales first, then the codes: the sparsifiers' wire format.
void pack_message(bulk::Ops& ops, bulk::QuantOps& quantizer, const bulk::QuantSpec& q,
                  const bulk::Buffer& scales, const bulk::Buffer& codes, bulk::Buffer& packed) {
  const int64_t g = scales.size();
  ops.resize(packed, Elem::U32, g + quant::words_for_bits(codes.size() * q.bits()));
  ops.copy(scales, 0, packed, 0, g);
  quantizer.pack_bits(codes, q.bits(), packed, g);
}

void unpack_message(bulk::Ops& ops, const bulk::QuantSpec& q, const std::string& who, int64_t n,
                    const bulk::Buffer& words, int64_t offset, int64_t count, bulk::Buffer& codes,
                    DeviceSelection& out) {
  bulk::QuantOps& quantizer = bulk::need<bulk::QuantOps>(ops, who);
  const int64_t g = q.groups(n);
  check_words(who, count, g + quant::words_for_bits(n * q.bits()));
  quantizer.unpack_bits(words, offset + g, n, q.bits(), codes);
  quantizer.dequantize(q, codes, words, offset, out.values);
  ops.iota(out.indices, n, 0);
}

}  // namespace

void StochasticQuantizer::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                                    DeviceSelection& out) {
  bulk::QuantOps& quantizer = bulk::need<bulk::QuantOps>(ops, name());
  const bulk::QuantSpec q = spec(ctx);
  quantizer.quantize(q, x, scales_, codes_, out.values);
  pack_message(ops, quantizer, q, scales_, codes_, out.packed);
  ops.iota(out.indices, x.size(), 0);
}

void StochasticQuantizer::unpack_on(bulk::Ops& ops, const SelectContext& ctx, int64_t n,
                                    const bulk::Buffer& words, int64_t offset, int64_t count,
                                    DeviceSelection& out) const {
  unpack_message(ops, spec(ctx), name(), n, words, offset, count, codes_, out);
}

namespace {
// The --sp keys, spelled once: keys() declares them, the constructors read them.
constexpr char kLevels[] = "levels", kChunk[] = "chunk", kClip[] = "clip";
}  // namespace

std::vector<SpKey> Qsgd::keys() {
  return {whole(kLevels, 15, "[1, 1048576]", "stochastic levels s (4-bit setting: 15)"),
          whole(kChunk, 512, "[0, inf)", "elements per norm (0: the whole bucket)")};
}

Qsgd::Qsgd(const SpValues& v)
    : levels_(static_cast<int32_t>(v.get_int(kLevels))), chunk_(v.get_int(kChunk)) {}

Qsgd::Qsgd(const SparsifierOptions& o) : Qsgd(SpValues(kName, keys(), o.params)) {}

bulk::QuantSpec Qsgd::spec(const SelectContext& ctx) const {
  bulk::QuantSpec q;
  q.kind = bulk::QuantKind::Qsgd;
  q.chunk = chunk_;
  q.levels = levels_;
  q.seed = ctx.seed;
  q.stream = quant::rounding_stream(ctx.rank, ctx.bucket, ctx.iteration);
  return q;
}

std::vector<SpKey> TernGrad::keys() {
  return {whole(kChunk, 0, "[0, inf)", "elements sharing one scale (0: the whole bucket)"),
          real(kClip, 2.5, "[0, inf)", "clip to clip x sigma before scaling (0 = off)")};
}

TernGrad::TernGrad(const SpValues& v)
    : chunk_(v.get_int(kChunk)), clip_(static_cast<float>(v.get(kClip))) {}

TernGrad::TernGrad(const SparsifierOptions& o) : TernGrad(SpValues(kName, keys(), o.params)) {}

bulk::QuantSpec TernGrad::spec(const SelectContext& ctx) const {
  bulk::QuantSpec q;
  q.kind = bulk::QuantKind::TernGrad;
  q.chunk = chunk_;
  q.clip = clip_;
  q.seed = ctx.seed;
  q.stream = quant::rounding_stream(ctx.rank, ctx.bucket, ctx.iteration);
  return q;
}

}  // namespace st
