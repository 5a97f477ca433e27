// ProcessGroupCommunicator: the Communicator interface over a PyTorch c10d::ProcessGroup,
// so the sparsify hook exchanges over DDP's own group (gloo on CPU) and no MPI is needed
// under torchrun. Every collective waits for its c10d work before it returns (the hook
// runs its exchange synchronously inside DDP's comm hook). Host tensors only.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "comm/communicator.h"

namespace st {

class ProcessGroupCommunicator : public Communicator {
 public:
  explicit ProcessGroupCommunicator(c10::intrusive_ptr<c10d::ProcessGroup> group);
  std::string backend() const override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  ST_COMMUNICATOR_COLLECTIVES

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  int rank_ = 0, size_ = 1;
};

}  // namespace st
