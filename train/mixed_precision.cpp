#include "train/mixed_precision.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"
#include "core/kernels/conv_onednn.h"
#include "core/timer.h"
#include "layers/precision.h"
#include "train/flags.h"

namespace st {

ConvProbe probe_bf16_convolution() {
  ConvProbe p;
  if (!cpu::onednn_built()) return p;
  constexpr int64_t kBatch = 32, kChannels = 64, kSide = 8;
  const cpu::ConvGeometry g{.c = kChannels,
                            .h = kSide,
                            .w = kSide,
                            .kh = 3,
                            .kw = 3,
                            .sh = 1,
                            .sw = 1,
                            .ph = 1,
                            .pw = 1,
                            .oh = kSide,
                            .ow = kSide};
  const int64_t act = kBatch * kChannels * kSide * kSide, wsize = kChannels * kChannels * 9;
  std::vector<float> x(act), y(act), dy(act), dx(act), w(wsize), dw(wsize);
  for (int64_t i = 0; i < act; ++i) {
    x[i] = static_cast<float>((i * 7919) % 257) / 257.0f - 0.5f;
    dy[i] = static_cast<float>((i * 104729) % 263) / 263.0f - 0.5f;
  }
  for (int64_t i = 0; i < wsize; ++i) w[i] = static_cast<float>((i * 31) % 61) / 610.0f - 0.05f;
  cpu::OneDnnConv bf16(kBatch, kChannels, g, false, /*bf16=*/true);
  cpu::OneDnnConv fp32(kBatch, kChannels, g, false, /*bf16=*/false);
  auto run = [&](cpu::OneDnnConv& conv) {
    Timer t;
    conv.forward(x.data(), w.data(), nullptr, y.data());
    conv.backward(x.data(), w.data(), dy.data(), dw.data(), nullptr, dx.data());
    return t.ms();
  };
  // One untimed run each (JIT code, first touch), then alternate and keep each one's best:
  // a neighbour's burst of load then slows a single run, not one side.
  run(bf16);
  run(fp32);
  p.bf16_ms = p.fp32_ms = 1e30;
  for (int r = 0; r < 5; ++r) {
    p.bf16_ms = std::min(p.bf16_ms, run(bf16));
    p.fp32_ms = std::min(p.fp32_ms, run(fp32));
  }
  return p;
}

std::string bf16_speed_notice(const ConvProbe& p) {
  if (!(p.bf16_ms > 0 && p.fp32_ms > 0) || p.bf16_ms <= 1.1 * p.fp32_ms) return "";
  char line[256];
  std::snprintf(line, sizeof(line),
                "sparsetrain: note: bf16 convolutions run %.1fx slower than fp32 on this CPU "
                "(probe: %.2f ms vs %.2f ms); --precision fp32 is faster here",
                p.bf16_ms / p.fp32_ms, p.bf16_ms, p.fp32_ms);
  return line;
}

MixedPrecision::MixedPrecision(const TrainConfig& c, Layer& model, bool announce)
    : precision_(
          parse_precision(c.precision, flag_label(flag_of(&TrainConfig::precision)).c_str())),
      model_(model) {
  if (precision_ != Precision::F32) set_model_precision(model, precision_);
  if (precision_ == Precision::BF16 && c.device == "cpu" && announce && !c.quiet) {
    const std::string note = bf16_speed_notice(probe_bf16_convolution());
    if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
  }
  // bf16 keeps fp32's exponent range: gradients neither overflow nor flush to zero more
  // than in fp32, so it trains unscaled (as PyTorch's bf16 autocast does).
  if (precision_ == Precision::F16) scaler_ = std::make_unique<LossScaler>();
}

bool MixedPrecision::unscale_and_check(Tensor& grads, Communicator& comm) {
  if (!scaler_) return true;
  step_scale_ = scaler_->scale();
  if (scaler_->unscale_and_check(grads, comm)) return true;
  const std::vector<Buffer*> buffers = collect_buffers(model_);
  for (size_t i = 0; i < buffers.size() && i < kept_buffers_.size(); ++i)
    buffers[i]->value.copy_from(kept_buffers_[i]);
  return false;
}

void MixedPrecision::keep_buffers() {
  if (!scaler_) return;
  const std::vector<Buffer*> buffers = collect_buffers(model_);
  if (kept_buffers_.size() != buffers.size()) {
    kept_buffers_.clear();
    for (Buffer* b : buffers) kept_buffers_.push_back(b->value.clone());
    return;
  }
  for (size_t i = 0; i < buffers.size(); ++i) kept_buffers_[i].copy_from(buffers[i]->value);
}

void MixedPrecision::add_metrics(MetricRow& row) const {
  if (!scaler_) return;
  row.push_back({"loss_scale", static_cast<double>(step_scale_)});
  row.push_back({"skipped", int64_t{scaler_->last_skipped() ? 1 : 0}});
}

void MixedPrecision::save(std::map<std::string, std::string>& meta) const {
  if (scaler_) scaler_->save(meta);
}

void MixedPrecision::restore(const std::map<std::string, std::string>& meta,
                             const std::string& path) {
  if (scaler_) scaler_->restore(meta, path);
}

}  // namespace st
