// ExDyna (Yoon & Oh, "Preserving Near-Optimal Gradient Sparsification Cost for Scalable
// Distributed Deep Learning", CCGrid 2024, arXiv 2402.13781).
//
// MiCRO with partitions made of blocks whose boundaries move, so every rank selects
// about the same number of values and the padded index allgather wastes little
// (padding overhead max_i k_i * P / sum_i k_i - 1 toward 0). Per bucket
// (docs/ALGORITHMS.md "exdyna"):
//   grid     1024 blocks of b = floor(n/1024) rounded down to a multiple of 32; the
//            tail after the last block belongs to the last partition; partitions start
//            with near-equal block counts
//   moves    every iteration t > 0, from last iteration's per-rank counts mapped to the
//            partitions those ranks owned: one left-to-right sweep of part::balance_sweep
//            (1.05 rule, minimum 1024/(4P) blocks, cascading load estimates; by
//            default in the reference code's arithmetic, --sp ref=0 for real values)
//   the rest rotation, threshold, selection and exchange exactly as MiCRO.
// Small buckets (n < 1024*32, as the overlapped pipeline's first bucket can be) keep the
// balancing on a grid of floor(n/32) blocks of 32; buckets with fewer than P such
// blocks use MiCRO's element partitions (see part::block_grid).
#pragma once

#include <map>
#include <vector>

#include "sparsify/micro.h"

namespace st {

class ExDyna : public Micro {
 public:
  ExDyna(const part::ThresholdRule& threshold, const part::BlockRule& blocks);
  // MiCRO's --sp keys and the block rule's blocks, align, tol, min_div, fill, ref
  // (defaults: part::BlockRule), which the registry row lists; the block rule from their
  // validated values.
  static std::vector<SpKey> keys();
  static part::BlockRule blocks_from(const SpValues& values);

  std::string name() const override { return "exdyna"; }
  part::Range partition(int bucket, int p) const override;
  // Combines the threshold and the block counts (a 24-bit hash, exact in a float).
  double state_signature(int bucket) const override;
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

  // The bucket's block grid and per-partition block counts (empty counts: element
  // partitions), and how many boundary moves it has made so far.
  const part::BlockGrid& grid(int bucket) const;
  const std::vector<int64_t>& block_counts(int bucket) const;
  int64_t moves(int bucket) const;

 protected:
  void start_bucket(int bucket, int64_t n, int world) override;
  void adapt(const ExchangeFeedback& feedback) override;

 private:
  struct Layout {
    part::BlockGrid grid;
    std::vector<int64_t> counts;  // blocks per partition
    int64_t moves = 0;
  };
  const Layout& layout(int bucket) const;
  void check_layout(int bucket, const Layout& layout, const std::string& what) const;

  part::BlockRule rule_;
  std::map<int, Layout> layouts_;
};

}  // namespace st
