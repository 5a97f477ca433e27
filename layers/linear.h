// Linear: y = x W^T + b, with W [out, in] (PyTorch layout and names "weight", "bias").
// A tied Linear borrows W from another layer (the language model's decoder multiplies by
// the embedding matrix, Press & Wolf 2017): W is then neither registered nor announced;
// backward adds its dW share into the owner's gradient and the owner announces it.
#pragma once

#include "core/kernels/half.h"
#include "core/rng.h"
#include "layers/layer.h"

namespace st {

class Linear : public Layer {
 public:
  ~Linear() override { finish_queued_work(); }  // its queued tasks read its members
  Linear(int64_t in_features, int64_t out_features, bool bias, Rng& rng);
  // Tied: W = `shared` [out, in], owned by another layer; registers only "bias" (zeros).
  Linear(Param& shared, bool bias);
  std::string describe() const override;
  std::optional<TensorSpec> output_spec(const Tensor& x) const override;
  // dx = dy W runs after W's gradient is announced (the CUDA kernels' order).
  std::vector<const Param*> read_after_announcing() const override { return {weight_}; }
  Param& weight() { return *weight_; }
  Param* bias() { return bias_; }
  // Mixed precision (docs/PRECISION.md): the fp32 GEMM runs on operands (x, w, dy) rounded
  // to the 16-bit format (Debian's OpenBLAS does not export its bf16 GEMM, so this is
  // numerically a bf16 GEMM with fp32 accumulation, not a faster one); F16 also rounds the
  // results (y, dx) as fp16 tensors would hold them. The weight stays fp32. CPU only.
  void set_precision(Precision p) { precision_ = p; }
  Precision precision() const { return precision_; }

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  void check_input(const Tensor& x) const;
  int64_t in_, out_;
  Param* weight_;
  Param* bias_ = nullptr;
  bool tied_ = false;  // weight_ is borrowed: never announced here
  Tensor x_, w_;       // forward's operands as the GEMMs read them
  Precision precision_ = Precision::F32;
};

}  // namespace st
