// Build it yourself, step 2: buckets (tutorial page 3). The plan is cut once: parameters
// in the order their gradients become ready (last first), a bucket closed when the next
// parameter would push it over the cap. Each bucket travels as one message.
#include <algorithm>

#include "diy.h"

namespace diy {

std::vector<Bucket> plan_buckets(const std::vector<long>& sizes, double first_cap_bytes,
                                 double cap_bytes) {
  std::vector<Bucket> plan;
  for (int p = static_cast<int>(sizes.size()) - 1; p >= 0; --p) {
    const double cap = plan.size() == 1 ? first_cap_bytes : cap_bytes;
    if (plan.empty() || (!plan.back().params.empty() &&
                         4.0 * static_cast<double>(plan.back().numel + sizes[p]) > cap))
      plan.emplace_back();
    plan.back().params.push_back(p);
    plan.back().numel += sizes[p];
  }
  return plan;
}

void exchange_bucket(Grads& grads, const Bucket& b, MPI_Comm comm) {
  int P = 1;
  MPI_Comm_size(comm, &P);
  std::vector<float> packed;
  for (int p : b.params) packed.insert(packed.end(), grads[p].begin(), grads[p].end());
  MPI_Allreduce(MPI_IN_PLACE, packed.data(), static_cast<int>(packed.size()), MPI_FLOAT, MPI_SUM,
                comm);
  long at = 0;
  for (int p : b.params) {
    std::transform(packed.begin() + at, packed.begin() + at + static_cast<long>(grads[p].size()),
                   grads[p].begin(), [P](float v) { return v / static_cast<float>(P); });
    at += static_cast<long>(grads[p].size());
  }
}

void bucketed_exchange(Grads& grads, const std::vector<Bucket>& plan, MPI_Comm comm) {
  for (const Bucket& b : plan) exchange_bucket(grads, b, comm);
}

}  // namespace diy
