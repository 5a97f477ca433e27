#include "train/model_broadcast.h"

namespace st {

void broadcast_model(Layer& model, FlatParams& flat, Communicator& comm) {
  if (comm.size() == 1) return;
  comm.broadcast(flat.values(), 0);
  broadcast_buffers(model, comm);
}

void broadcast_buffers(Layer& model, Communicator& comm) {
  if (comm.size() == 1) return;
  for (Buffer* b : collect_buffers(model)) comm.broadcast(b->value, 0);
}

}  // namespace st
