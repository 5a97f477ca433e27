#include "train/sync_bn.h"

#include "comm/communicator.h"
#include "core/error.h"
#include "layers/batchnorm2d.h"

namespace st {

SyncBatchNorm::SyncBatchNorm(Layer& model, Communicator& comm, bool on) {
  if (!on) return;
  int layers = 0;
  model.visit_layers([&](Layer& layer) {
    auto* bn = dynamic_cast<BatchNorm2d*>(&layer);
    if (!bn) return;
    ++layers;
    bn->set_stat_sync([&comm](Tensor& t) { comm.allreduce_async(t).wait(); });
  });
  ST_CHECK(layers > 0, "--sync-bn: the model has no BatchNorm layers");
  model_ = &model;
}

SyncBatchNorm::~SyncBatchNorm() {
  if (!model_) return;
  model_->visit_layers([](Layer& layer) {
    if (auto* bn = dynamic_cast<BatchNorm2d*>(&layer)) bn->set_stat_sync(nullptr);
  });
}

}  // namespace st
