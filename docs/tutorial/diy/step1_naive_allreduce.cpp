// Build it yourself, step 1: the naive exchange (tutorial page 2). After backward, one
// blocking allreduce per parameter, in the order backward finished them (last parameter
// first), then a division by P so every rank holds the average.
#include "diy.h"

namespace diy {

void naive_exchange(Grads& grads, MPI_Comm comm) {
  int P = 1;
  MPI_Comm_size(comm, &P);
  for (auto it = grads.rbegin(); it != grads.rend(); ++it) {
    std::vector<float>& g = *it;
    MPI_Allreduce(MPI_IN_PLACE, g.data(), static_cast<int>(g.size()), MPI_FLOAT, MPI_SUM, comm);
    for (float& v : g) v /= static_cast<float>(P);
  }
}

}  // namespace diy
