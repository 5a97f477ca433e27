// Quantisers of the FFT paper and its baselines: the host-side decisions (the range-based
// float's format from the observed range, its header word) and the QSGD and TernGrad
// sparsifiers. The per-element math, shared with the CUDA implementation of bulk::Ops,
// is in sparsify/quant_math.h; bulk::Ops quantises and packs (quantize, pack_bits, ...).
// QSGD and TernGrad are also sparsifiers (below): every position, the dequantised
// values, the packed codes as wire format.
#pragma once

#include <cstdint>
#include <vector>

#include "sparsify/quant_math.h"
#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st::quant {

// Format for values with max |v| = max_abs and smallest non-zero |v| = min_abs: the
// exponent field spans floor(log2 max) - floor(log2 min) + 1 binades; when that needs
// more than width - 1 bits the top binades are kept (mantissa 0, smaller values round to
// a multiple of 2^exp0, possibly 0). Width in [2, 24].
RangeFloat range_float_format(float max_abs, float min_abs, int width);
// Header word <-> format.
uint32_t range_float_pack(const RangeFloat& f);
RangeFloat range_float_unpack(uint32_t word);

// Words holding `bits` bits (bulk::Ops::pack_bits fills them LSB-first).
int64_t words_for_bits(int64_t bits);

}  // namespace st::quant

namespace st {

// QSGD and TernGrad through the sparsify pipeline: they "select" every position with its
// dequantised value (AllgatherSum, Selection::values), and send the packed codes
// (Selection::packed): per chunk of `chunk` elements one float32 scale word (QSGD: the
// chunk's L2 norm; TernGrad: its max |x|), then n fixed-width codes LSB-first (QSGD:
// sign + ceil(log2(s+1)) bits; TernGrad: 2 bits). The hook allgathers the words and sums
// the ranks' dequantised vectors; bytes on the wire = 16 + 4 * words per rank. Error
// feedback stays on (the hook's residual keeps x - Q(x)): the unbiased quantisers then
// run as EF-QSGD / EF-TernGrad. Stochastic rounding draws Philox numbers keyed by
// (seed, rank, bucket, iteration).
// What QSGD and TernGrad share: select_on quantises and packs, unpack_on decodes one
// rank's message; a method only says how it quantises (spec()).
class StochasticQuantizer : public PackedSparsifier {
 public:
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;
  void unpack_on(bulk::Ops& ops, const SelectContext& ctx, int64_t n, const bulk::Buffer& words,
                 int64_t offset, int64_t count, DeviceSelection& out) const override;

 protected:
  // The quantiser for one bucket at one iteration (kind, chunk, parameters, rounding stream).
  virtual bulk::QuantSpec spec(const SelectContext& ctx) const = 0;

 private:
  mutable bulk::Buffer codes_, scales_;  // select / unpack scratch
};

class Qsgd : public StochasticQuantizer {
 public:
  static constexpr char kName[] = "qsgd";
  // The --sp keys levels (s) and chunk (QSGD's bucket size d), which the registry row
  // lists; the constructor reads their validated values (the second form validates
  // options.params first).
  static std::vector<SpKey> keys();
  explicit Qsgd(const SpValues& v);
  explicit Qsgd(const SparsifierOptions& o);
  std::string name() const override { return kName; }

 protected:
  bulk::QuantSpec spec(const SelectContext& ctx) const override;

 private:
  int32_t levels_;
  int64_t chunk_;
};

class TernGrad : public StochasticQuantizer {
 public:
  static constexpr char kName[] = "terngrad";
  // --sp chunk: elements sharing one scale (0 = the whole bucket, TernGrad's per-layer
  // max when buckets are layers; the paper's scaler sharing across workers is not used).
  // --sp clip: c of the gradient clipping to c sigma (paper Sec. 3.3; 0 = off).
  // keys() declares them for the registry row; the second form validates options first.
  static std::vector<SpKey> keys();
  explicit TernGrad(const SpValues& v);
  explicit TernGrad(const SparsifierOptions& o);
  std::string name() const override { return kName; }

 protected:
  bulk::QuantSpec spec(const SelectContext& ctx) const override;

 private:
  int64_t chunk_;
  float clip_;
};

}  // namespace st
