// Build it yourself, step 5: a threshold rule instead of a sort (tutorial page 6, MiCRO).
// Each rank compares only its own partition with tau (one pass, no sort); the
// partitions rotate every step and never overlap, so the union is the sum of the counts
// (no build-up); tau follows the global count with a fixed step, the same on every rank.
#include <cmath>

#include "diy.h"

namespace diy {

void threshold_exchange(std::vector<float>& g, ThresholdState& s, double density, MPI_Comm comm) {
  int P = 1, r = 0;
  MPI_Comm_size(comm, &P);
  MPI_Comm_rank(comm, &r);
  const long n = static_cast<long>(g.size());
  const long k = std::max(1L, static_cast<long>(std::floor(density * static_cast<double>(n))));
  if (s.residual.empty()) s.residual.assign(g.size(), 0.0f);
  if (s.tau < 0) s.tau = 1.0 / (2.0 * std::sqrt(static_cast<double>(k)));
  std::vector<float>& x = s.residual;
  for (long i = 0; i < n; ++i) x[i] += g[i];
  // This step's partition: (t + r) mod P; the first n mod P partitions hold one extra.
  const long p = (s.t % P + r) % P, q = n / P, rem = n % P;
  const long begin = p * q + std::min(p, rem), end = begin + q + (p < rem ? 1 : 0);
  std::vector<int> chosen;
  const float tau = static_cast<float>(s.tau);
  for (long i = begin; i < end; ++i)
    if (std::fabs(x[i]) >= tau) chosen.push_back(static_cast<int>(i));
  if (chosen.empty() && end > begin)
    chosen.push_back(static_cast<int>(begin + s.t % (end - begin)));
  const long sent = union_exchange(g, x, chosen, comm);
  // The same step on every rank, from the same global count.
  const double ratio = static_cast<double>(sent) / static_cast<double>(k);
  s.tau *= ratio > 1.1 ? 1.005 : ratio > 0.909 ? 1.00125 : 0.995;
  ++s.t;
}

}  // namespace diy
