// PairEmbedding: two lookup tables read with one input of (user, item) pairs, their rows
// joined side by side. x is int32 [2, N], row 0 the users and row 1 the items (two
// contiguous rows, so each table reads a view and no column is gathered); y is
// [N, 2 dim] = [user table row | item table row], the concatenation NCF's MLP branch
// takes and the pair its GMF branch multiplies (He et al. 2017, sec. 3.4; see
// HalvesProduct). A container: the children are Embedding layers named "user" and
// "item", the join and split are device-generic channel copies (core/channel_ops.h), so
// it runs on the CPU, the emulated device and CUDA with no kernel of its own. Ids get no
// gradient; each table's gradient is dense, its untouched rows zero.
#pragma once

#include "core/rng.h"
#include "layers/embedding.h"
#include "layers/sequential.h"

namespace st {

class PairEmbedding : public RoutingContainer {
 public:
  // Both tables' weights are N(0, stddev^2).
  PairEmbedding(int64_t users, int64_t items, int64_t dim, Rng& rng, float stddev);
  std::string describe() const override;
  bool has_input_grad() const override { return false; }  // ids have none
  Embedding& user() { return *user_; }
  Embedding& item() { return *item_; }

 protected:
  std::vector<std::pair<std::string, Layer*>> children() override;
  Tensor route_forward(const Tensor& x) override;
  Tensor route_backward(const Tensor& dy) override;

 private:
  std::unique_ptr<Embedding> user_, item_;
  int64_t n_ = -1;  // pairs in the last forward
};

}  // namespace st
