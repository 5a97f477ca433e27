// LocalCommunicator: a world of one process; every collective is the identity.
#pragma once

#include "comm/communicator.h"

namespace st {

class LocalCommunicator : public Communicator {
 public:
  std::string backend() const override { return "local"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce(Tensor&, ReduceOp) override {}
  void allgather(const Tensor& in, Tensor& out) override;
  void allgatherv(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts) override;
  void broadcast(Tensor&, int root) override;
  void barrier() override {}
  std::vector<std::string> gather_bytes(const std::string& mine, int root) override;
  // Any group of a world of one is that world.
  std::unique_ptr<Communicator> split(int, int) override {
    return std::make_unique<LocalCommunicator>();
  }
};

}  // namespace st
