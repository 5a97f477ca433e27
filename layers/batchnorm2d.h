// BatchNorm2d (Ioffe & Szegedy 2015) over NCHW: per-channel batch statistics in
// training, running statistics in evaluation. Names follow PyTorch: weight, bias,
// running_mean, running_var, num_batches_tracked.
#pragma once

#include <functional>

#include "layers/layer.h"

namespace st {

class BatchNorm2d : public Layer {
 public:
  ~BatchNorm2d() override { finish_queued_work(); }  // its queued tasks read its members
  explicit BatchNorm2d(int64_t channels, float eps = 1e-5f, float momentum = 0.1f);
  std::string describe() const override { return "BatchNorm2d(" + std::to_string(c_) + ")"; }
  Param& weight() { return *gamma_; }
  Param& bias() { return *beta_; }
  Tensor& running_mean() { return mean_->value; }
  Tensor& running_var() { return var_->value; }
  // Synchronised BatchNorm: `sync` sums a float tensor over all ranks in place. Training
  // then normalises with the statistics of the batch of all ranks, and backward sums
  // the per-channel gradient statistics the same way. Empty = per-rank statistics.
  using StatSync = std::function<void(Tensor&)>;
  void set_stat_sync(StatSync sync) { sync_ = std::move(sync); }
  // Reads and writes the 16-channel blocked layout too (core/layout.h), in float32 or
  // bfloat16 (statistics and sums in float32 and double either way); its output and input
  // gradient keep the input's type and layout. With synchronised statistics it works on
  // plain float32 tensors.
  bool takes_blocked() const override { return c_ % 16 == 0; }
  bool takes_bf16() const override { return c_ % 16 == 0; }
  std::optional<TensorSpec> output_spec(const Tensor& x) const override;

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  void check_input(const Tensor& x) const;
  // The blocked layout's forward and backward (layers/batchnorm2d_blocked.cpp), over
  // float or bfloat16 elements T (x, y, dy and dx share one type).
  Tensor forward_blocked(const Tensor& x);
  Tensor backward_blocked(const Tensor& dy);
  template <class T>
  void forward_blocked_of(const T* in, T* out, int64_t n, int64_t hw);
  template <class T>
  void backward_blocked_of(const T* in, const T* g, T* out, int64_t n, int64_t hw);
  void synced_statistics(const Tensor& x, float* mean, float* var, float* unbiased);
  // dx of channel c from its gradient sums (this rank's, or all ranks' when synced).
  void channel_dx(const float* in, const float* g, float* out, int64_t n, int64_t hw, int64_t c,
                  float sdy, float sdx, float inv_m) const;
  int64_t c_;
  float eps_, momentum_;
  Param* gamma_;
  Param* beta_;
  Buffer* mean_;
  Buffer* var_;
  Buffer* tracked_;
  Tensor x_;
  DType in_dtype_ = DType::F32;  // dx goes back in the type and layout x came in
  Layout in_layout_ = Layout::Plain;
  Tensor batch_mean_, batch_inv_std_;  // [C], saved for backward
  bool used_batch_stats_ = true;
  StatSync sync_;
  double sync_count_ = 0;  // values per channel over all ranks in the last forward
};

}  // namespace st
