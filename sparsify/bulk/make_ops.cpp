#include "sparsify/bulk/bulk_ops.h"
#include "sparsify/bulk/cpu_ops.h"

namespace st::bulk {

OpsPtr make_ops(Device device) {
  if (device.is_cuda()) return make_cuda_ops(device);
  return std::make_unique<CpuOps>();
}

}  // namespace st::bulk
