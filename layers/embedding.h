// Embedding: a lookup table, y[..., :] = W[x[...], :] for int32 token ids x, with W
// [num_embeddings, dim] (PyTorch's nn.Embedding layout and name "weight"). Backward
// scatter-adds dy into the rows that were looked up; token ids get no gradient, so
// backward returns an undefined tensor. CUDA (embedding_cuda.cu): a gather kernel, and a
// scatter-add that sums each row's contributions in the CPU's order (bit-identical).
#pragma once

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

class Embedding : public Layer {
 public:
  ~Embedding() override { finish_queued_work(); }  // its queued tasks read its members
  // Weights uniform in [-init_range, init_range] (0.1 in the PyTorch word-language-model
  // example and in Zaremba et al. 2014's small model).
  Embedding(int64_t num_embeddings, int64_t dim, Rng& rng, float init_range = 0.1f);
  std::string describe() const override;
  std::optional<TensorSpec> output_spec(const Tensor& x) const override;
  bool has_input_grad() const override { return false; }  // token ids have none
  Param& weight() { return *weight_; }
  int64_t num_embeddings() const { return num_; }
  int64_t dim() const { return dim_; }

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  // Checks x's dtype; returns the output shape x.shape() + [dim].
  Shape output_shape(const Tensor& x) const;
  int64_t num_, dim_;
  Param* weight_;
  Tensor ids_;
};

}  // namespace st
