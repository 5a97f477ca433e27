// EF-signSGD (Karimireddy, Rebjock, Stich & Jaggi, "Error Feedback Fixes SignSGD and
// other Gradient Compression Schemes", ICML 2019, Algorithm 1): each rank sends the
// scaled sign of x = g + e,
//     C(x) = (||x||_1 / d) sign(x)        (d: elements sharing the scale)
// one bit per element plus one float32 scale per tensor (the reference code compresses
// each parameter tensor on its own) or per bucket (--sp per_tensor=0). The hook keeps
// e = x - C(x) and allgathers the packed words; every rank decodes and averages the P
// messages (AllgatherSum with the packed wire format, like QSGD and TernGrad).
#pragma once

#include <vector>

#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st {

class SignSgd : public PackedSparsifier {
 public:
  // The --sp key per_tensor, which the registry row lists; the constructor reads it.
  static std::vector<SpKey> keys();
  explicit SignSgd(const SpValues& v);
  std::string name() const override { return "signsgd"; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;
  void unpack_on(bulk::Ops& ops, const SelectContext& ctx, int64_t n, const bulk::Buffer& words,
                 int64_t offset, int64_t count, DeviceSelection& out) const override;

  // Start offsets of the scale groups: the bucket's tensors, or the whole bucket.
  std::vector<int64_t> groups(const SelectContext& ctx) const;

 private:
  bulk::QuantSpec spec(const SelectContext& ctx) const;

  bool per_tensor_;
  mutable bulk::Buffer codes_, scales_;  // select / unpack scratch
};

}  // namespace st
