// FFT-based gradient sparsification (Wang et al., "FFT-based Gradient Sparsification for
// the Distributed Training of Deep Neural Networks", HPDC 2020, arXiv 1811.08596;
// docs/ALGORITHMS.md "fft"):
//   per tensor: real FFT (bulk::Ops::rfft: FFTW on the CPU, cuFFT on CUDA), keep the (1 - theta)
//   fraction of that tensor's coefficients with the largest magnitude (at least one), quantise
//   their real and imaginary parts with a range-based float of `bits` bits, pack, exchange
//   (allgather-sum in the frequency domain), sum, inverse real FFT (scale 1/N), divide by P.
// The hook's transform-domain extension does the exchange: the coefficient domain is every
// tensor's half spectrum, interleaved (re, im), 2 (L/2 + 1) floats per tensor of L; a kept
// coefficient j of a tensor at domain offset o selects positions o + 2j and o + 2j + 1.
// "Per tensor" uses SelectContext::segments (the bucket's parameters); without them (tests,
// benchmarks) the whole bucket is one tensor. --sp block > 0 further cuts tensors into
// pieces of at most `block` elements.
//
// theta diminishes (the paper's convergence argument needs it; schedule unverified):
// theta_t = max(theta_min, theta_0 decay^floor(t / every)), theta_0 = --sp theta, or
// 1 - density when theta < 0 (the default), so --density sets the initial kept fraction.
//
// Wire format per rank (32-bit words): [range-float format][k][k coefficient indices
// (domain offset / 2 + j)][2k codes of `bits` bits, LSB-first: re, im of each]; nothing
// when k = 0. Bytes: 4 (2 + k) + ceil(2 k bits / 32) * 4, i.e. 6 (bits 8) or 8 (bits 16)
// bytes per kept coefficient instead of 16 for two (index, float) pairs.
#pragma once

#include <map>
#include <vector>

#include "sparsify/quantizers.h"
#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st {

class FftSparsifier : public PackedSparsifier {
 public:
  static constexpr char kName[] = "fft";
  // The --sp keys theta, theta_min, decay, every, bits, block, which the registry row
  // lists; the constructor reads their validated values (the second form validates
  // options.params first).
  static std::vector<SpKey> keys();
  explicit FftSparsifier(const SpValues& v);
  explicit FftSparsifier(const SparsifierOptions& o);

  std::string name() const override { return kName; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;
  void unpack_on(bulk::Ops& ops, const SelectContext& ctx, int64_t n, const bulk::Buffer& words,
                 int64_t offset, int64_t count, DeviceSelection& out) const override;
  bool transform_domain() const override { return true; }
  int64_t domain_size(const SelectContext& ctx, int64_t n) const override;
  void decode_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& coeffs, int64_t n,
                 bulk::Buffer& out) override;
  double state_signature(int bucket) const override;

  // theta at iteration t for a density d.
  double theta(int64_t t, double density) const;

  // One transformed piece: bucket elements [begin, begin + len), domain [coef, coef + 2 (len/2 +
  // 1)).
  using Piece = bulk::FftPiece;
  std::vector<Piece> layout(const SelectContext& ctx, int64_t n) const;

 private:
  double theta0_, theta_min_, decay_;
  int64_t every_, block_;
  int bits_;
  std::map<int, double> last_theta_;  // per bucket (rank-identical)
  // select / unpack scratch
  mutable bulk::Buffer coef_, mag_, keep_, kept_, codes_, header_;
};

}  // namespace st
