// PowerSGD (Vogels, Karimireddy & Jaggi, "PowerSGD: Practical Low-Rank Gradient
// Compression for Distributed Optimization", NeurIPS 2019, Algorithm 1): every tensor of
// the bucket, reshaped to a rows x cols matrix M (first dimension x the rest), is sent
// as a rank-r product by one step of subspace iteration:
//     P = M Q;  allreduce P;  P^ = orthogonalise(P) (Gram-Schmidt);
//     Q = M^T P^;  allreduce Q;  update = P^ Q^T / W
// Q is reused across steps (warm start): the next step starts from the averaged Q.
// Vectors, matrices below --sp min_size elements and matrices whose factors would not
// be smaller travel dense inside the second message. Error feedback stays exact: the
// residual is M - P^ Q_own^T, whose sum over the ranks is sum M - W * update.
// Exchange pattern: LowRank (two allreduces; sparsify_hook.cpp).
#pragma once

#include <map>
#include <vector>

#include "sparsify/device_state.h"
#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st {

class PowerSgd : public Sparsifier {
 public:
  // The --sp keys rank, min_size, warm_start, which the registry row lists; the
  // constructor reads their validated values.
  static std::vector<SpKey> keys();
  explicit PowerSgd(const SpValues& v);
  std::string name() const override { return "powersgd"; }
  ExchangePattern pattern() const override { return ExchangePattern::LowRank; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;
  void second_message_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                         const bulk::Buffer& first_sum, bulk::Buffer& out) override;
  void decode_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& coeffs, int64_t n,
                 bulk::Buffer& out) override;
  void observe(const ExchangeFeedback& fb) override;
  double state_signature(int bucket) const override;
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

  // One tensor of the bucket: [begin, begin + rows * cols), compressed at `rank` or dense.
  struct Block {
    int64_t begin = 0, rows = 1, cols = 1, rank = 0;  // rank 0 = dense
  };
  // The bucket's blocks, from SelectContext::segments/rows; a bucket without them is one
  // matrix of the most square shape rows x cols = n (rows the largest divisor <= sqrt n).
  std::vector<Block> layout(const SelectContext& ctx, int64_t n) const;
  // Gram-Schmidt on the columns of a row-major rows x cols matrix, in place (the
  // reference's orthogonalize: each column divided by its norm + 1e-8).
  static void orthogonalize(float* m, int64_t rows, int64_t cols);

 private:
  struct State {
    DeviceState q;            // warm-start Q of every compressed block, concatenated
    bulk::Buffer phat;        // this step's orthogonalised P
    std::vector<float> host;  // P on the host for Gram-Schmidt
  };
  State& state(bulk::Ops& ops, const SelectContext& ctx, const std::vector<Block>& blocks);

  int64_t rank_;
  int64_t min_size_;
  bool warm_start_;
  std::map<int, State> state_;
};

}  // namespace st
