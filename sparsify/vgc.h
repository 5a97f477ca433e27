// Variance-based gradient compression (Tsuzuku, Imachi, Akiba, "Variance-based Gradient
// Compression for Efficient Distributed Deep Learning", arXiv 1802.06058; docs/ALGORITHMS.md):
// delay an element until it is unambiguous, i.e. large against the variance of its
// minibatch-mean estimate.
//   r: the accumulated gradient = the hook's error-feedback x (grad + residual);
//   v: per element, += s / B^2 each step, s = sum over samples of the squared per-sample
//      gradient. Layers provide sum_i (term_i)^2 where term_i = g_i / B is sample i's share
//      of the mean gradient (the loss averages over the batch), which is already s / B^2;
//   send i iff r_i^2 > alpha v_i (or |r_i| > tau when tau > 0, Strom's rule);
//   sent: v_i = 0 and r_i leaves with its quantised value (the residual keeps only the
//   quantisation error, so error feedback stays exact; the paper resets r_i to 0);
//   unsent: v_i *= zeta.
// Constants alpha = 1.5 (paper: "1 to 2"), zeta = 0.999, tau = 0 (off) are unverified.
//
// Wire format (unverified layout, "a few bits packed with the index in 32 bits"): one
// float32 scale word (max |r| sent), then one word per sent element:
//   [ index : b bits | sign : 1 bit | e : 31 - b bits ],  b = ceil(log2 n),
// value = sign * scale * 2^-e with e chosen so the value is the nearest power-of-two
// fraction of scale (relative error <= 1/3); e saturates at 2^(31-b) - 1 (quant::vgc_encode in
// sparsify/quant_math.h). Needs n <= 2^29.
//
// Where the per-sample sums are missing (no aux provider, or a layer that cannot provide
// them: BatchNorm), v += g^2 / B, a lower bound of s / B^2 (Cauchy-Schwarz: sum g_i^2 >=
// (sum g_i)^2 / B); such elements are sent more eagerly. B is --sp batch when no provider
// is installed; SqGradients (sparsify/sq_gradients.h) knows the real batch size.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "comm/reducer.h"
#include "sparsify/device_state.h"
#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st {

class Vgc : public PackedSparsifier {
 public:
  static constexpr char kName[] = "vgc";
  // The --sp keys alpha, zeta, tau, batch, which the registry row lists; the constructor
  // reads their validated values (the second form validates options.params first).
  static std::vector<SpKey> keys();
  explicit Vgc(const SpValues& v);
  explicit Vgc(const SparsifierOptions& o);
  std::string name() const override { return kName; }
  bool sends_at_least_one() const override { return false; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;
  void unpack_on(bulk::Ops& ops, const SelectContext& ctx, int64_t n, const bulk::Buffer& words,
                 int64_t offset, int64_t count, DeviceSelection& out) const override;
  // Accumulated variance of a bucket (tests).
  std::vector<float> variance(int bucket) const { return v_.at(bucket).host(); }

  // The index field's width for a bucket of n elements (entries: quant::vgc_encode).
  static int index_bits(int64_t n);

  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  double alpha_, zeta_, tau_;
  int64_t batch_;
  std::map<int, DeviceState> v_;
};

// VGC's own passes (bulk/pass.h) on any bulk::Ops.
namespace vgc {
// vi = v + add (aux, or grad^2 inv_batch); send when x^2 > alpha vi or |x| > tau > 0:
// v = 0 and i to `out` (ascending); else v = vi zeta. Returns the largest |x| sent.
float test(bulk::Ops& ops, const bulk::Buffer& x, const bulk::Buffer* aux, const bulk::Buffer* grad,
           float inv_batch, float alpha, float zeta, float tau, bulk::Buffer& v, bulk::Buffer& out);
// packed = the bits of `scale`, then quant::vgc_encode per entry; values = their decoding.
void pack(bulk::Ops& ops, const bulk::Buffer& x, const bulk::Buffer& idx, float scale,
          int index_bits, bulk::Buffer& packed, bulk::Buffer& values);
// The inverse, from `count` >= 1 words of `words` at `offset`.
void unpack(bulk::Ops& ops, const bulk::Buffer& words, int64_t offset, int64_t count,
            int index_bits, bulk::Buffer& idx, bulk::Buffer& values);
}  // namespace vgc

}  // namespace st
