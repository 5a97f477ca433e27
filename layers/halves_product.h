// HalvesProduct: y[n, j] = x[n, j] * x[n, d + j] for x [N, 2d], y [N, d]: the element-wise
// product of two vectors that arrive joined side by side. NCF's generalized matrix
// factorization branch (He et al. 2017, eq. 9, "GMF") multiplies a user's and an item's
// latent vectors this way; a layer of one input keeps the Layer contract, and the join
// before it is PairEmbedding's (layers/pair_embedding.h). CUDA: halves_product_cuda.cu.
#pragma once

#include "layers/layer.h"

namespace st {

class HalvesProduct : public Layer {
 public:
  ~HalvesProduct() override { finish_queued_work(); }  // its queued tasks read its members
  std::string describe() const override { return "HalvesProduct"; }
  std::optional<TensorSpec> output_spec(const Tensor& x) const override;

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  // Checks x is [N, 2d] float; returns [N, d].
  Shape output_shape(const Tensor& x) const;
  Tensor x_;  // both factors, for backward
};

}  // namespace st
