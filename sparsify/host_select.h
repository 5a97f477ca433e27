// A device-ready sparsifier (Sparsifier::select_on) run on host memory through the CPU
// implementation of bulk::Ops: for callers that hold x as plain floats (unit tests,
// fuzz targets, benchmarks, tools) and for the host select() of converted methods.
// x (and the grad/aux side inputs, when set) are copied into CPU buffers.
#pragma once

#include "sparsify/sparsifier.h"

namespace st {

void select_on_host(Sparsifier& sp, const SelectContext& ctx, const float* x, int64_t n,
                    Selection& out);

}  // namespace st
