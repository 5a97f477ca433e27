#include "sparsify/fft.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace st {

using bulk::Elem;

namespace {

// The --sp keys, spelled once: keys() declares them, the constructor reads them.
constexpr char kTheta[] = "theta", kThetaMin[] = "theta_min", kDecay[] = "decay",
               kEvery[] = "every", kBits[] = "bits", kBlock[] = "block";

// A piece of `count` coefficients keeps floor((1 - theta) count) of them, at least one.
int64_t kept_share(double theta, int64_t count) {
  const auto k = static_cast<int64_t>(std::floor((1.0 - theta) * static_cast<double>(count)));
  return std::clamp<int64_t>(k, 1, count);
}

}  // namespace

std::vector<SpKey> FftSparsifier::keys() {
  return {real(kTheta, -1, "(-inf, 1)", "initial theta (negative: 1 - --density)"),
          real(kThetaMin, 0, "[0, 1)", "floor of the theta schedule"),
          real(kDecay, 0.99, "(0, 1]", "theta factor every `every` iterations"),
          whole(kEvery, 1000, "[1, inf)", "iterations between theta decays"),
          whole(kBits, 16, "[2, 24]", "width of the range-based float"),
          whole(kBlock, 0, "[0, inf)",
                "transform pieces of at most this many elements (0: whole tensors; not 1)")};
}

FftSparsifier::FftSparsifier(const SpValues& v)
    : theta0_(v.get(kTheta)),
      theta_min_(v.get(kThetaMin)),
      decay_(v.get(kDecay)),
      every_(v.get_int(kEvery)),
      block_(v.get_int(kBlock)),
      bits_(static_cast<int>(v.get_int(kBits))) {
  // A piece of one element has no spectrum to cut; the declared range cannot say "not 1".
  ST_CHECK(block_ != 1, "--sparsifier fft: --sp block=1 is not allowed; block takes 0 or >= 2");
}

FftSparsifier::FftSparsifier(const SparsifierOptions& o)
    : FftSparsifier(SpValues(kName, keys(), o.params)) {}

double FftSparsifier::theta(int64_t t, double density) const {
  const double t0 = theta0_ >= 0 ? theta0_ : 1.0 - density;
  const double th = t0 * std::pow(decay_, static_cast<double>(t / every_));
  return std::max(theta_min_, std::min(th, t0));
}

std::vector<FftSparsifier::Piece> FftSparsifier::layout(const SelectContext& ctx, int64_t n) const {
  std::vector<int64_t> starts = ctx.segments;
  if (starts.empty() || starts.front() != 0) starts.insert(starts.begin(), 0);
  std::vector<Piece> pieces;
  int64_t coef = 0;
  for (size_t s = 0; s < starts.size(); ++s) {
    const int64_t end = s + 1 < starts.size() ? starts[s + 1] : n;
    for (int64_t b = starts[s]; b < end;) {
      const int64_t len = block_ > 0 ? std::min(block_, end - b) : end - b;
      pieces.push_back({b, len, coef});
      coef += 2 * (len / 2 + 1);
      b += len;
    }
  }
  return pieces;
}

int64_t FftSparsifier::domain_size(const SelectContext& ctx, int64_t n) const {
  const std::vector<Piece> p = layout(ctx, n);
  return p.empty() ? 0 : p.back().coef + 2 * (p.back().len / 2 + 1);
}

void FftSparsifier::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                              DeviceSelection& out) {
  bulk::TransformOps& transforms = bulk::need<bulk::TransformOps>(ops, name());
  bulk::QuantOps& quantizer = bulk::need<bulk::QuantOps>(ops, name());
  const int64_t n = x.size();
  const std::vector<Piece> pieces = layout(ctx, n);
  ops.resize(coef_, Elem::F32, domain_size(ctx, n));
  transforms.rfft(x, pieces, coef_);
  // Every piece (a tensor, or a block of one) keeps the (1 - theta) fraction of its own
  // coefficients with the largest magnitude: |F| grows with sqrt(length), so one cut over
  // the whole bucket would leave short tensors (biases, BatchNorm) with nothing.
  const double th = theta(ctx.iteration, ctx.density);
  last_theta_[ctx.bucket] = th;
  transforms.sq_magnitudes(coef_, mag_);  // squared magnitude: same order, no hypot
  std::vector<bulk::TopkRange> ranges;
  ranges.reserve(pieces.size());
  for (const Piece& p : pieces) {
    const int64_t first = p.coef / 2, count = p.len / 2 + 1;
    ranges.push_back({first, first + count, kept_share(th, count)});
  }
  const float cut = transforms.topk_abs_ranges(mag_, ranges, keep_);
  const int64_t k = keep_.size();
  out.threshold = std::sqrt(cut);  // the smallest kept magnitude
  // The kept (re, im) parts; range-based float over them: the exponent field spans
  // log2(max / min non-zero).
  transforms.pair_indices(keep_, out.indices);
  ops.gather(coef_, out.indices, kept_);
  const float mx = ops.stats(kept_, {0, 2 * k}).abs_max;
  const float mn = quantizer.abs_min_nonzero(kept_, {0, 2 * k});
  const quant::RangeFloat f = quant::range_float_format(mx, mn, bits_);
  quantizer.range_float_quantize(f, kept_, codes_, out.values);
  // [format][k][k coefficient indices][2k codes]
  const uint32_t header[2] = {quant::range_float_pack(f), static_cast<uint32_t>(k)};
  ops.upload(header, Elem::U32, 2, header_);
  ops.resize(out.packed, Elem::U32, 2 + k + quant::words_for_bits(2 * k * bits_));
  ops.copy(header_, 0, out.packed, 0, 2);
  ops.copy(keep_, 0, out.packed, 2, k);
  quantizer.pack_bits(codes_, bits_, out.packed, 2 + k);
}

void FftSparsifier::unpack_on(bulk::Ops& ops, const SelectContext&, int64_t,
                              const bulk::Buffer& words, int64_t offset, int64_t count,
                              DeviceSelection& out) const {
  bulk::TransformOps& transforms = bulk::need<bulk::TransformOps>(ops, name());
  bulk::QuantOps& quantizer = bulk::need<bulk::QuantOps>(ops, name());
  if (count == 0) {
    ops.resize(out.indices, Elem::I32, 0);
    ops.resize(out.values, Elem::F32, 0);
    return;
  }
  ST_CHECK(count >= 2, "fft: packed message of ", count, " words is too short");
  uint32_t header[2];
  ops.download(words, offset, 2, header);
  const quant::RangeFloat f = quant::range_float_unpack(header[0]);
  const int64_t k = header[1];
  ST_CHECK(f.width == bits_ && count == 2 + k + quant::words_for_bits(2 * k * bits_),
           "fft: packed message of ", count, " words does not hold ", k, " coefficients of ", bits_,
           " bits");
  ops.resize(keep_, Elem::I32, k);
  ops.copy(words, offset + 2, keep_, 0, k);
  transforms.pair_indices(keep_, out.indices);
  quantizer.unpack_bits(words, offset + 2 + k, 2 * k, bits_, codes_);
  quantizer.range_float_dequantize(f, codes_, out.values);
}

void FftSparsifier::decode_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& coeffs,
                              int64_t n, bulk::Buffer& out) {
  bulk::TransformOps& transforms = bulk::need<bulk::TransformOps>(ops, name());
  ops.resize(out, Elem::F32, n);
  transforms.irfft(coeffs, layout(ctx, n), out);
}

double FftSparsifier::state_signature(int bucket) const {
  auto it = last_theta_.find(bucket);
  return it == last_theta_.end() ? 0.0 : it->second;
}

}  // namespace st
