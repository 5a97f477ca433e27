// A sparsifier (Sparsifier::select_on) run on host memory through this thread's CPU
// implementation of bulk::Ops (thread_cpu_ops): for callers that hold x as plain floats
// (unit tests, fuzz targets, benchmarks, tools). x and the side inputs, when given (n floats each:
// SelectContext::grad_buffer, aux_buffer), are copied into CPU buffers.
#pragma once

#include "sparsify/sparsifier.h"

namespace st {

void select_on_host(Sparsifier& sp, const SelectContext& ctx, const float* x, int64_t n,
                    Selection& out, const float* grad = nullptr, const float* aux = nullptr);

}  // namespace st
