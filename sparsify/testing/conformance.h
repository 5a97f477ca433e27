// The sparsifier conformance checks, as a library: any method in the registry (built in,
// or added by a program through register_sparsifier) runs through SparsifyHook on the CPU
// implementation of bulk::Ops for a few steps on two buckets, on every rank of a
// communicator, and every property the exchange promises is checked
// (docs/ALGORITHMS.md, "Notation and shared machinery"). The side inputs the method's
// registry row asks for are supplied as the training loop would (squared gradients: each
// rank's step is one sample, so g^2):
//   - the averaged update is identical on every rank and equals the dense reference
//     computed from the ranks' contributions (x - residual after the exchange);
//   - union-style patterns contribute x at every result position and nothing elsewhere;
//     allgather-sum contributes only at the rank's own selection (transform-domain
//     methods: the decoded own selection); low-rank messages are small and equal-sized;
//   - error feedback loses nothing: sum_t P*update_t + sum_r residual_r = sum_{t,r} grad;
//   - counts, actual density and bytes are accounted; selections are unique and never
//     empty when the method promises to send something;
//   - the rule's state agrees on every rank;
//   - the phase timers are non-negative and add up to no more than the exchange (and the
//     exchange, error feedback and selection to no more than the whole call); the logged
//     residual norm is the norm of the residual.
// The in-tree suite (tests/sparsify/conformance_test.cpp) and out-of-tree methods
// (examples/custom_sparsifier) call check_conformance and require report.passed().
#pragma once

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"

namespace st::conformance {

struct Case {
  std::string method;                                // a registry name (--sparsifier)
  double density = 0.01;                             // --density
  std::map<std::string, std::string> params;         // --sp key=value
  std::vector<int64_t> bucket_sizes = {6000, 2500};  // two buckets: per-bucket state
  int64_t steps = 8;
  uint64_t seed = 17;
};

struct Report {
  std::string method;
  int64_t checks = 0;                 // properties checked on this rank
  std::vector<std::string> failures;  // one line each (at most kMaxFailures kept)
  int64_t failed = 0;                 // failures, including those not kept

  static constexpr size_t kMaxFailures = 20;
  bool passed() const { return failed == 0; }
  // "topk: 412 checks passed" or the failures, one per line.
  std::string summary() const;

  // Counts a check; records `parts` as one line when it failed. Returns ok.
  template <class... Parts>
  bool check(bool ok, const Parts&... parts) {
    ++checks;
    if (ok) return true;
    ++failed;
    if (failures.size() < kMaxFailures) {
      std::ostringstream s;
      s << method << ": ";
      (s << ... << parts);
      failures.push_back(s.str());
    }
    return false;
  }
};

// Runs case `c` on every rank of `comm` (a collective: every rank calls it with the same
// case). Throws st::Error when the method is unknown or its --sp values are invalid.
Report check_conformance(const Case& c, Communicator& comm);

// The gradients the checks feed in: normal times |normal| (heavy-tailed, as gradients'
// magnitudes are), different on every rank, step and bucket.
Tensor heavy_tailed_gradient(int64_t n, int rank, int64_t step, int bucket);

}  // namespace st::conformance
