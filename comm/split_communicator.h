// SplitCommunicator: one process group over two backends, chosen per call by where the
// tensors live. Host tensors -- the control plane: configuration fingerprints, the bucket
// plan check, stop and checkpoint flags, scalar sums, identifiers -- go to the host backend
// (MPI); device tensors -- gradients, parameters, bucket messages -- go to the device
// backend (NCCL), which accepts device memory only. This is how `--comm nccl` (and
// `--comm auto` under mpirun with an accelerator) runs: a device collective library
// cannot carry the few host values every training step also agrees on.
//
// Each plane is a single-caller resource (MPI in THREAD_SERIALIZED mode; an NCCL
// communicator must not be entered by two threads at once): a second thread entering a
// plane while another is inside is an error naming the plane and the rank, not a hang
// or a corrupted collective.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "comm/communicator.h"

namespace st {

class MpiCommunicator;

class SplitCommunicator : public Communicator {
 public:
  // Builds the device plane over a host communicator (its bootstrap): how split() makes
  // the device plane of a group.
  using DeviceFactory = std::function<std::unique_ptr<Communicator>(MpiCommunicator&)>;
  // `device` was built on top of `host` (its bootstrap); both must span the same ranks.
  // Without `remake`, split() is refused.
  SplitCommunicator(std::unique_ptr<Communicator> host, std::unique_ptr<Communicator> device,
                    DeviceFactory remake = nullptr);
  ~SplitCommunicator() override;

  std::string backend() const override { return device_->backend(); }
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  NodePlacement placement() const override { return host_->placement(); }

  ST_COMMUNICATOR_COLLECTIVES
  void reduce_scatter(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts) override;
  // Both planes split alike: the host plane with MPI, the device plane built anew over it
  // (NCCL from a unique id of the group's own, the emulated collective over the group).
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  // Marks one plane as entered by this thread for the length of a call.
  class Entry;
  struct Plane {
    Communicator* comm = nullptr;
    const char* name = "";
    std::atomic<std::thread::id> inside{};
  };
  // The plane `t`'s memory belongs to; a host tensor paired with a device tensor is an error.
  Plane& plane_of(const Tensor& t);
  Plane& plane_of(const Tensor& in, const Tensor& out, const char* op);

  std::unique_ptr<Communicator> host_;
  std::unique_ptr<Communicator> device_;
  DeviceFactory remake_;
  Plane host_plane_, device_plane_;
};

}  // namespace st
