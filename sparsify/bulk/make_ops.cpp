#include "sparsify/bulk/bulk_ops.h"

#include "core/error.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/bulk/emu_ops.h"

namespace st::bulk {

OpsPtr make_ops(Device device) {
  if (device.is_cuda()) return make_cuda_ops(device);
  if (device.is_emu()) return std::make_unique<EmuOps>(device);
  return std::make_unique<CpuOps>();
}

void throw_missing_family(const std::string& method, const char* family, const Ops& ops) {
  ST_THROW("--sparsifier ", method, " needs the ", family, " passes of bulk::Ops, which ",
           ops.name(), " on ", ops.device().str(), " does not provide");
}

}  // namespace st::bulk
