// Deep Gradient Compression (Lin et al., ICLR 2018; docs/ALGORITHMS.md "dgc").
//   sampled threshold   draw ~1% of the positions (`sample`), thr = the smallest of the
//                       top-d fraction of their |v| (at least one sample)
//   selection           {|v_j| >= thr}; if that is more than 4k/3, exact Top-k inside it
//                       (the paper's hierarchical selection)
//   exchange            allgather-sum
// v is x (gradient + residual) unless momentum correction is on (`momentum` m > 0,
// DGC Sec. 3.2, eqs. 6-7): then the rank keeps per bucket the velocity u and the
// accumulation v and runs
//   u <- m u + g,   v <- v + u,   send v at the selection, v <- 0 there,
// and with momentum factor masking (`mask`, Sec. 3.3) also u <- 0 there. The momentum then
// lives here, so train with the optimizer's --momentum 0 (the default m = 0 leaves
// momentum to the optimizer). g is recovered as x - (the residual the hook kept last
// step), which this rule knows because it chose what was sent; the hook's residual is
// then sum(g) - sum(sent), which keeps the error-feedback bookkeeping exact.
#pragma once

#include <map>
#include <vector>

#include "sparsify/device_state.h"
#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st {

struct DgcOptions {
  double sample = 0.01;   // fraction of positions sampled for the threshold
  double momentum = 0.0;  // momentum correction coefficient m (0 = off)
  bool mask = true;       // momentum factor masking (with momentum correction)
};

class Dgc : public Sparsifier {
 public:
  explicit Dgc(const DgcOptions& options);
  // The --sp keys sample, momentum, mask (defaults: DgcOptions), which the registry row
  // lists, and the options from their validated values.
  static std::vector<SpKey> keys();
  static DgcOptions options_from(const SpValues& v);
  std::string name() const override { return "dgc"; }
  ExchangePattern pattern() const override { return ExchangePattern::AllgatherSum; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;

  // thr from a sample of |v|: the smallest of its top max(1, round(d * samples)). The
  // sample (positions drawn from Philox) is gathered on the device and ranked on the host.
  float sampled_threshold(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& v);
  // The momentum-correction state of a bucket (empty when off or not yet used; tests).
  std::vector<float> velocity(int bucket) const { return state_.at(bucket).u.host(); }
  std::vector<float> accumulation(int bucket) const { return state_.at(bucket).v.host(); }

  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  struct BucketState {
    DeviceState u;     // velocity
    DeviceState v;     // accumulated velocity (what is sent)
    DeviceState seen;  // the hook's residual after the last step
  };
  DgcOptions opt_;
  std::map<int, BucketState> state_;
  bulk::Buffer positions_, sample_, candidates_;  // select scratch
  std::vector<int32_t> host_positions_;
  std::vector<float> host_sample_;
};

namespace dgc {
// The momentum correction (eqs. 6-7), DGC's own pass (bulk/pass.h) on any bulk::Ops:
// u = m u + (x - seen); v = v + u; seen = x, over buffers of x's size.
void momentum(bulk::Ops& ops, float m, const bulk::Buffer& x, bulk::Buffer& u, bulk::Buffer& v,
              bulk::Buffer& seen);
}  // namespace dgc

}  // namespace st
