// Rank 0's model becomes every rank's: at start its parameters and buffers (docs/DESIGN.md
// explains why the ranks start equal), before an evaluation or a checkpoint its buffers.
#pragma once

#include "comm/communicator.h"
#include "layers/flat_params.h"
#include "layers/layer.h"

namespace st {

// Rank 0's parameters and buffers become everyone's.
void broadcast_model(Layer& model, FlatParams& flat, Communicator& comm);
// Rank 0's buffers (BatchNorm running statistics) become everyone's, so a sharded
// evaluation and the saved model agree (PyTorch DDP's default broadcast_buffers).
void broadcast_buffers(Layer& model, Communicator& comm);

}  // namespace st
