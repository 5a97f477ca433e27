// Compiled when this build has no CUDA implementation of bulk::Ops: a CUDA bucket then
// stops with one line instead of running anything on the host behind the caller's back.
#include "core/error.h"
#include "sparsify/bulk/bulk_ops.h"

namespace st::bulk {

bool cuda_ops_built() {
  return false;
}

OpsPtr make_cuda_ops(Device device) {
  ST_THROW("bulk passes on ", device.str(),
           ": this sparsetrain was built without the CUDA backend of bulk::Ops "
           "(sparsify/bulk/core_cuda.cu)");
}

}  // namespace st::bulk
