// SIDCo (Abdelmoniem et al., MLSys 2021, arXiv 2101.10761): threshold from a fitted
// sparsity-inducing law on a = |x| / ||x||_2 (sparsify/sidco_fit.h), strict `a > eta`
// selection, allgather-sum exchange. Three registry names, one per variant: sidco-e
// (exponential), sidco-p (generalized Pareto), sidco-gp (gamma, then Pareto).
//
// Adaptive stage count (docs/ALGORITHMS.md): every `every` exchanges of a bucket, the mean of
// achieved/target (each rank's count / k, averaged over ranks and the window) outside
// [1 - band, 1 + band] moves M by one within [1, ceil(ln delta / ln 0.5)]. Direction +1
// raises M on over-selection; tests/sparsify/sidco_test.cpp shows on Student-t(3) data
// that this is the direction that brings the ratio toward 1 on heavy tails. -1 is the
// reverse (the reference code's mode -1), 0 keeps M fixed.
// `auto` (default) starts with +1 and turns round per bucket when a move left the ratio
// further from 1, or when a bound blocks the move: under error feedback the accumulated
// gradient is light-tailed (each residual grows until it crosses the last threshold and
// is reset), the fits then under-select at M = 1 and only raising M helps (measured in
// docs/results/sidco_vgc_fft.md: achieved/target 0.01 with +1, 0.98 with -1 on ResNet-20).
// M depends only on allgathered counts, so it is identical on every rank.
// stages = 0 is the reference code's fixed-ratio mode: every stage keeps delta_1 = 0.25
// of the previous stage's exceedances, the last one the rest, so M = ceil(ln delta /
// ln 0.25) follows from delta and is not adapted (sidco::stage_deltas).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sparsify/sidco_fit.h"
#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st {

class Sidco : public Sparsifier {
 public:
  static constexpr int kAuto = 2;
  struct Options {
    sidco::Variant variant = sidco::Variant::E;
    int stages = 1;     // initial M (0: fixed ratio per stage, no adaptation)
    int adapt = kAuto;  // +1, -1, 0 or kAuto (see above)
    int every = 5;      // exchanges per adaptation window
    double band = 0.2;  // tolerated |achieved/target - 1|
  };
  // The --sp keys stages, adapt, every, band (defaults: Options), which the registry rows
  // of the three variants list, and the options from their validated values; the second
  // form validates options.params against keys() first.
  static std::vector<SpKey> keys();
  static Options from(const SpValues& v, sidco::Variant variant);
  static Options from(const SparsifierOptions& o, sidco::Variant variant);
  // The registry name of a variant: sidco-e, sidco-p, sidco-gp.
  static std::string method_name(sidco::Variant variant);

  explicit Sidco(Options o);
  std::string name() const override;
  ExchangePattern pattern() const override { return ExchangePattern::AllgatherSum; }
  bool sends_at_least_one() const override { return false; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;
  void observe(const ExchangeFeedback& fb) override;
  double state_signature(int bucket) const override;
  // Current M of a bucket (tests, statistics).
  int stages(int bucket) const;
  // The adaptive rule on one window's mean ratio: the new M.
  static int adapt_stages(int m, double ratio, int direction, double band, int max_m);

  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  struct State {
    int m = 1;
    double ratio_sum = 0;
    int seen = 0;
    int max_m = 1;
    int direction = 1;      // auto: the current direction
    bool moved = false;     // auto: the last window changed M
    double last_error = 0;  // auto: |ln ratio| of the last window
    sidco::Workspace ws;
  };
  State& state(int bucket, double delta);
  Options opt_;
  std::map<int, State> state_;
};

}  // namespace st
