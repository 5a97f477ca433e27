#include "train/mixed_precision.h"

#include "comm/communicator.h"
#include "core/error.h"
#include "layers/precision.h"
#include "train/flags.h"

namespace st {

MixedPrecision::MixedPrecision(const TrainConfig& c, Layer& model)
    : precision_(
          parse_precision(c.precision, flag_label(flag_of(&TrainConfig::precision)).c_str())) {
  if (precision_ != Precision::F32) set_model_precision(model, precision_);
  // bf16 keeps fp32's exponent range: gradients neither overflow nor flush to zero more
  // than in fp32, so it trains unscaled (as PyTorch's bf16 autocast does).
  if (precision_ == Precision::F16) scaler_ = std::make_unique<LossScaler>();
}

bool MixedPrecision::unscale_and_check(Tensor& grads, Communicator& comm) {
  if (!scaler_) return true;
  step_scale_ = scaler_->scale();
  return scaler_->unscale_and_check(grads, comm);
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
