// Build it yourself, step 6: the optimiser state sharded (ZeRO stage 1, Rajbhandari et al.,
// SC 2020). DDP's allreduce is a reduce-scatter followed by an allgather (page 9's ring);
// here the update runs between the two, on 1/P of the parameters, so each rank keeps 1/P
// of the momentum. The bytes per rank are the ring allreduce's, 2 (P - 1)/P n values; what
// the allgather moves is parameters instead of gradients.
#include <algorithm>

#include "diy.h"

namespace diy {

std::pair<long, long> shard_of(long n, int P, int r) {
  const long q = n / P, rem = n % P;
  return {r * q + std::min<long>(r, rem), q + (r < rem ? 1 : 0)};
}

void sharded_sgd_step(std::vector<float>& params, const std::vector<float>& grad, ShardedSgd& opt,
                      MPI_Comm comm) {
  int P = 1, r = 0;
  MPI_Comm_size(comm, &P);
  MPI_Comm_rank(comm, &r);
  const long n = static_cast<long>(params.size());
  std::vector<int> counts(P), offsets(P);
  for (int k = 0; k < P; ++k) {
    const auto [first, count] = shard_of(n, P, k);
    offsets[k] = static_cast<int>(first);
    counts[k] = static_cast<int>(count);
  }
  // Each rank receives the sum over the ranks of its own shard of the gradient.
  std::vector<float> g(counts[r]);
  MPI_Reduce_scatter(grad.data(), g.data(), counts.data(), MPI_FLOAT, MPI_SUM, comm);
  if (opt.velocity.empty()) opt.velocity.assign(g.size(), 0.0f);
  float* p = params.data() + offsets[r];
  for (size_t i = 0; i < g.size(); ++i) {
    const float avg = g[i] / static_cast<float>(P);
    opt.velocity[i] = static_cast<float>(opt.momentum) * opt.velocity[i] + avg;
    p[i] -= static_cast<float>(opt.lr) * opt.velocity[i];
  }
  // Every rank's updated shard to every rank.
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, params.data(), counts.data(), offsets.data(),
                 MPI_FLOAT, comm);
}

}  // namespace diy
