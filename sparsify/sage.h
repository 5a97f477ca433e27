// SAGE, on-the-fly threshold scaling (Yoon et al.; the rule of the MiCRO authors'
// SageReducer; docs/ALGORITHMS.md). Per bucket:
//   t = 0:  lambda = 1/(2 sqrt(k)); s = mean |x| over a Slovin-sized sample
//           (n / (1 + n e^2), e = 0.05, i.e. ~400 positions for large n)
//   t > 0:  alpha = s_t / s_{t-1}                      (sampled magnitude drift)
//           d_exam = #{|x| >= alpha lambda} / n        (density the drifted threshold gives)
//           beta = 2 / (1 + exp(d - d_exam))
//           gamma = 0.95 if d_exam < d/10, 1.05 if d_exam > 10 d, else 1
//           lambda <- lambda * alpha * beta * gamma
//   select {|x_j| >= lambda}; union-allreduce.
// The reference never updates s_{t-1} (it stays 1, so alpha = s_t); this applies the
// stated ratio of consecutive sample means. lambda adapts to the rank's own gradient, as
// in the reference, so it is rank-local state: union-allreduce needs no agreement, and
// state_signature() stays 0 (nothing must match across ranks).
#pragma once

#include <map>
#include <vector>

#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st {

struct SageOptions {
  double slovin_e = 0.05;  // margin of error in Slovin's sample size
  double band = 10.0;      // gamma acts when d_exam / d leaves [1/band, band]
  double down = 0.95;      // gamma below the band
  double up = 1.05;        // gamma above the band
};

class Sage : public Sparsifier {
 public:
  explicit Sage(const SageOptions& options);
  // The --sp keys slovin_e, band, down, up (defaults: SageOptions), which the registry row
  // lists, and the options from their validated values.
  static std::vector<SpKey> keys();
  static SageOptions options_from(const SpValues& v);
  std::string name() const override { return "sage"; }
  ExchangePattern pattern() const override { return ExchangePattern::UnionAllreduce; }
  bool sends_at_least_one() const override { return false; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;

  // lambda used by the bucket's last selection (0 before the first; tests).
  double lambda(int bucket) const;
  // Slovin's formula n / (1 + n e^2), at least 1.
  static int64_t sample_size(int64_t n, double e);

  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  struct BucketState {
    double lambda = 0;
    double sample_mean = 0;
  };
  double sample_mean(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x);
  SageOptions opt_;
  std::map<int, BucketState> state_;
  bulk::Buffer sample_idx_, sample_;  // the sample's positions and values
};

}  // namespace st
