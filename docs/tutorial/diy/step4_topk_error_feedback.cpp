// Build it yourself, step 4: Top-k with error feedback (tutorial page 5), exchanged as
// union-allreduce (page 6): allgather the counts, allgather the indices, allreduce x at
// the union of every rank's choice.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "diy.h"

namespace diy {

void topk_exchange(std::vector<float>& g, std::vector<float>& residual, double density,
                   MPI_Comm comm) {
  const int n = static_cast<int>(g.size());
  // Error feedback: what was not sent before is added to this step's gradient.
  std::vector<float>& x = residual;
  for (int i = 0; i < n; ++i) x[i] += g[i];
  // This rank's choice: the k largest magnitudes.
  const int k = std::max(1, static_cast<int>(std::floor(density * n)));
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(),
                   [&](int a, int b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  idx.resize(k);
  union_exchange(g, x, idx, comm);
}

long union_exchange(std::vector<float>& g, std::vector<float>& x, const std::vector<int>& chosen,
                    MPI_Comm comm) {
  int P = 1;
  MPI_Comm_size(comm, &P);
  // Every rank's count, then every rank's indices.
  const int k = static_cast<int>(chosen.size());
  std::vector<int> counts(P), offsets(P, 0);
  MPI_Allgather(&k, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  for (int r = 1; r < P; ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
  std::vector<int> all(offsets[P - 1] + counts[P - 1]);
  MPI_Allgatherv(chosen.data(), k, MPI_INT, all.data(), counts.data(), offsets.data(), MPI_INT,
                 comm);
  // The union, the same on every rank; x there, summed over the ranks.
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  std::vector<float> values(all.size());
  for (size_t j = 0; j < all.size(); ++j) values[j] = x[all[j]];
  MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_FLOAT, MPI_SUM,
                comm);
  // Apply the average at the union; the residual keeps what was not sent.
  std::fill(g.begin(), g.end(), 0.0f);
  for (size_t j = 0; j < all.size(); ++j) {
    g[all[j]] = values[j] / static_cast<float>(P);
    x[all[j]] = 0.0f;
  }
  return static_cast<long>(all.size());
}

}  // namespace diy
