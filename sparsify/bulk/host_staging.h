// Collectives of a device implementation of bulk::Ops (CudaOps, EmuOps) over a backend that
// takes host tensors only (MPI, Local): the device views are copied to the host, the
// collective runs there, and the outputs are copied back into the device views.
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"

namespace st::bulk {

// `inputs` are only read by `op`; `outputs` are read and written in place (a broadcast's
// root sends them). On return every pointer again refers to its device view.
void on_host_copies(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                    const std::function<void()>& op);

}  // namespace st::bulk
