// --sync-bn: every BatchNorm of a model sums its batch statistics over the ranks, on the
// communication thread (in order with the bucket exchanges that backward overlaps).
#pragma once

#include "layers/layer.h"

namespace st {

class Communicator;

// Installs the statistics sum in every BatchNorm2d of `model` (refused in one line when
// it has none) and removes it when the object goes.
class SyncBatchNorm {
 public:
  SyncBatchNorm(Layer& model, Communicator& comm, bool on);
  ~SyncBatchNorm();
  SyncBatchNorm(const SyncBatchNorm&) = delete;
  SyncBatchNorm& operator=(const SyncBatchNorm&) = delete;

 private:
  Layer* model_ = nullptr;  // null when off
};

}  // namespace st
