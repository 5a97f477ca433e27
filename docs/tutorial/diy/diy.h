// Build it yourself (docs/tutorial/diy/README.md): a data-parallel trainer in numbered
// steps, each a short file. This header is what the steps share: the model's gradients
// and the functions each step writes.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace diy {

// One gradient tensor per parameter, in registration order (first layer first).
using Grads = std::vector<std::vector<float>>;

// Step 1 (step1_naive_allreduce.cpp): after backward, average every parameter's gradient
// over the ranks with one blocking MPI_Allreduce each, last parameter first.
void naive_exchange(Grads& grads, MPI_Comm comm);

// Step 2 (step2_buckets.cpp): cut the parameters, last first, into buckets of at most
// cap_bytes (first_cap_bytes for the first; a parameter larger than the cap gets a bucket
// of its own) and average each bucket with one MPI_Allreduce over a packed copy.
struct Bucket {
  std::vector<int> params;  // indices into Grads, in launch order
  long numel = 0;
};
std::vector<Bucket> plan_buckets(const std::vector<long>& sizes, double first_cap_bytes,
                                 double cap_bytes);
void bucketed_exchange(Grads& grads, const std::vector<Bucket>& plan, MPI_Comm comm);
// One bucket: pack, one MPI_Allreduce, unpack divided by P.
void exchange_bucket(Grads& grads, const Bucket& bucket, MPI_Comm comm);

}  // namespace diy

namespace diy {

// Step 4 (step4_topk_error_feedback.cpp): Top-k with error feedback on one bucket.
// x = g + residual; each rank chooses the k = max(1, floor(density n)) largest |x|; the
// union of all ranks' choices travels (counts, then indices, then x at the union, summed);
// g becomes the average at the union and 0 elsewhere; the residual keeps x, zeroed at the
// union (every rank sent its x there).
void topk_exchange(std::vector<float>& g, std::vector<float>& residual, double density,
                   MPI_Comm comm);
// The exchange step 4 and step 5 share: every rank's chosen positions (counts, then
// indices, allgathered), x summed at their union; g = the average there and 0 elsewhere,
// x zeroed there. Returns the union's size, the same on every rank.
long union_exchange(std::vector<float>& g, std::vector<float>& x, const std::vector<int>& chosen,
                    MPI_Comm comm);

// Step 5 (step5_threshold.cpp): MiCRO's threshold rule instead of a sort. Rank r owns
// partition (t + r) mod P of P near-equal partitions and sends every |x| >= tau there
// (one element, own.begin + t mod size, if none passes); after the exchange every rank
// moves tau by the same step from the global count: x 1.005 above 1.1 k, x 1.00125
// above 0.909 k, x 0.995 below; tau starts at 1 / (2 sqrt(k)).
struct ThresholdState {
  std::vector<float> residual;
  double tau = -1.0;  // not started
  long t = 0;
};
void threshold_exchange(std::vector<float>& g, ThresholdState& s, double density, MPI_Comm comm);

}  // namespace diy

namespace diy {

// Step 3 (step3_overlap.cpp): overlap. Backward announces each parameter's gradient (last
// parameter first); a bucket whose last gradient arrived is handed to a communication
// thread, strictly in bucket order, while backward goes on; finish() waits for all of
// them (the exposed communication).
class OverlapExchanger {
 public:
  OverlapExchanger(Grads& grads, std::vector<Bucket> plan, MPI_Comm comm);
  ~OverlapExchanger();
  void grad_ready(int param);
  void finish();
  int launched() const { return next_launch_; }

 private:
  void run();
  Grads& grads_;
  std::vector<Bucket> plan_;
  MPI_Comm comm_;
  std::vector<int> bucket_of_, pending_;
  int next_launch_ = 0, done_ = 0;
  std::deque<int> queue_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace diy

namespace diy {

// Step 6 (step6_sharded_optimizer.cpp): the optimiser state sharded (ZeRO stage 1). Rank r
// owns shard r of the flat parameters (P near-equal shards, the first n mod P one longer)
// and keeps SGD's momentum for that shard only. A step: reduce-scatter the gradients (each
// rank receives the sum of its shard), divide by P, update the shard (v = m v + g,
// p -= lr v, as torch.optim.SGD), then allgather the updated shards so every rank holds
// all parameters again.
struct ShardedSgd {
  double lr = 0.1, momentum = 0.9;
  std::vector<float> velocity;  // this rank's shard only
};
// This rank's shard of n elements over P ranks: {first element, count}.
std::pair<long, long> shard_of(long n, int P, int r);
void sharded_sgd_step(std::vector<float>& params, const std::vector<float>& grad, ShardedSgd& opt,
                      MPI_Comm comm);

}  // namespace diy
