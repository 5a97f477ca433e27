#include "sparsify/bulk/bulk_ops.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/bulk/emu_ops.h"

namespace st::bulk {

OpsPtr make_ops(Device device) {
  if (device.is_cuda()) return make_cuda_ops(device);
  if (device.is_emu()) return std::make_unique<EmuOps>(device);
  return std::make_unique<CpuOps>();
}

}  // namespace st::bulk
