// The training loop's side of --precision and --comm-dtype (docs/PRECISION.md): it sets
// the model's Conv2d/Linear precision (on either device), and for fp16 owns the dynamic
// loss scaler: the loss gradient is multiplied by the scale, the exchanged gradient
// divided by it, and an overflowed step is skipped.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/kernels/half.h"
#include "layers/layer.h"
#include "train/config.h"
#include "train/loss_scaler.h"
#include "train/metrics.h"

namespace st {

class Communicator;

// The bf16 speed check at the start of a CPU --precision bf16 run (docs/PRECISION.md):
// without AMX, oneDNN's bf16 convolutions can be slower than its fp32 ones (the bf16 dot
// product instruction does no more multiply-adds per cycle than fp32 FMA, and the
// operands are converted on every reorder), so bf16 would cost time and buy nothing.
struct ConvProbe {
  double bf16_ms = 0;  // best of a few forward+backward runs; 0 when not measured
  double fp32_ms = 0;
};
// One representative convolution (ResNet-20's widest stage: 64 -> 64 channels, 3x3, 8x8,
// batch 32) forward and backward through oneDNN in bf16 and in fp32, alternating; a few
// ms. Zero times without oneDNN.
ConvProbe probe_bf16_convolution();
// The one-line notice when bf16 ran more than 10% slower than fp32 (the margin keeps a
// noisy tie quiet), naming the ratio and the faster choice; empty otherwise.
std::string bf16_speed_notice(const ConvProbe& p);

class MixedPrecision {
 public:
  // With bf16 on the CPU and `announce` (the printing rank of a run that is not --quiet),
  // runs probe_bf16_convolution and prints bf16_speed_notice to stderr when it says one.
  MixedPrecision(const TrainConfig& c, Layer& model, bool announce = true);
  Precision precision() const { return precision_; }
  // The factor the loss gradient is multiplied by before backward (1 without fp16).
  float loss_scale() const { return scaler_ ? scaler_->scale() : 1.0f; }
  // fp16: steps may overflow and be skipped.
  bool scales_loss() const { return scaler_ != nullptr; }
  // After the exchange: unscales the gradient (fp16); false when the step must be
  // skipped, and then the model's buffers are as keep_buffers() saw them. Collective
  // under fp16 (every rank calls it).
  bool unscale_and_check(Tensor& grads, Communicator& comm);
  // fp16, before a step's forwards: a skipped (overflowed) step leaves no trace, so the
  // BatchNorm running statistics its forwards update are kept to be put back.
  void keep_buffers();
  // fp16: the iteration row's "loss_scale" (the scale this step's backward used) and
  // "skipped" (1 when the step overflowed and the optimiser did not run).
  void add_metrics(MetricRow& row) const;
  // The loss scaler's state in checkpoint metadata, and its restore on --resume.
  void save(std::map<std::string, std::string>& meta) const;
  void restore(const std::map<std::string, std::string>& meta, const std::string& path);

 private:
  Precision precision_;
  Layer& model_;
  std::unique_ptr<LossScaler> scaler_;
  std::vector<Tensor> kept_buffers_;  // fp16: the buffers before the current step
  float step_scale_ = 1.0f;           // the scale of the last checked step
};

}  // namespace st
