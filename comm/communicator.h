// Communicator: the collectives data-parallel training needs, over one process group.
// Backends: MPI (CPU tensors, Open MPI), NCCL (CUDA tensors, bootstrapped over MPI) and
// Local (a single process; every collective is the identity). Collectives block the
// calling thread; the *_async variants run on the communicator's own worker thread, in
// submission order, and return a handle to wait on. While async work is in flight, the
// caller must not start blocking collectives (MPI runs in THREAD_SERIALIZED mode).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/comm_worker.h"
#include "comm/shared_segments.h"
#include "core/device.h"
#include "core/tensor.h"

namespace st {

enum class ReduceOp { Sum, Max, Min };

// The collectives of the interface below, declared in one line by a backend that
// implements all of them out of line (MpiCommunicator, SplitCommunicator).
#define ST_COMMUNICATOR_COLLECTIVES                                                            \
  void allreduce(Tensor& t, ReduceOp op) override;                                             \
  void allgather(const Tensor& in, Tensor& out) override;                                      \
  void allgatherv(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts) override; \
  void broadcast(Tensor& t, int root) override;                                                \
  void barrier() override;                                                                     \
  std::vector<std::string> gather_bytes(const std::string& mine, int root) override;

class MpiCommunicator;

class Communicator {
 public:
  virtual ~Communicator();

  virtual std::string backend() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This process's place on its node (a single process: alone on it).
  virtual NodePlacement placement() const { return {rank(), 0, 1}; }

  // In place: every rank ends with the element-wise reduction over all ranks.
  virtual void allreduce(Tensor& t, ReduceOp op = ReduceOp::Sum) = 0;
  // out[r * n : (r+1) * n] = in of rank r, with n = in.numel(); out has size() * n elements.
  virtual void allgather(const Tensor& in, Tensor& out) = 0;
  // Variable counts: rank r contributes counts[r] elements (in.numel() == counts[rank()]),
  // placed at the prefix-sum offset in out.
  virtual void allgatherv(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts) = 0;
  virtual void broadcast(Tensor& t, int root) = 0;
  virtual void barrier() = 0;
  // Rank `root` receives every rank's bytes, indexed by rank; the others get an empty
  // vector. Host memory on every backend (NCCL forwards to its MPI bootstrap): meant for
  // diagnostics such as the trace, not for the training step.
  virtual std::vector<std::string> gather_bytes(const std::string& mine, int root) = 0;
  // `in` summed over the ranks, of which rank r keeps the counts[r] elements at the
  // prefix-sum offset: out.numel() == counts[rank()], sum(counts) == in.numel(). The base
  // sums a copy of `in` with allreduce and keeps this rank's part (what the emulated
  // collective runs); MPI sends each rank its parts with one all-to-all and sums them in
  // rank order; NCCL reduces each rank's part to that rank, grouped.
  virtual void reduce_scatter(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts);
  // A communicator over the ranks that pass the same `color`, ordered by `key` (then by
  // rank): MPI_Comm_split's meaning. Every rank of this communicator must call it, in
  // the same order as its other collectives. The sub-communicator has a worker of its own.
  virtual std::unique_ptr<Communicator> split(int color, int key);
  // Segments of host memory every rank reads and writes directly (comm/shared_segments.h),
  // or null where the ranks do not share memory or the backend has none (the base).
  // Collective on the first call, which decides for the communicator's life.
  virtual SharedSegments* shared_segments() { return nullptr; }

  // Asynchronous variants: queued on the worker thread; tensors must stay alive and
  // untouched until the handle is waited on.
  Work allreduce_async(Tensor& t, ReduceOp op = ReduceOp::Sum);
  Work allgather_async(const Tensor& in, Tensor& out);
  Work broadcast_async(Tensor& t, int root);
  // Runs any closure on the worker thread (the reducer's bucket exchanges use this).
  Work submit(std::function<void()> fn);
  // Blocks until every submitted task has finished.
  void wait_idle();

  // Scalar helpers on top of allreduce.
  double allreduce_scalar(double v, ReduceOp op = ReduceOp::Sum);
  // Throws on any rank whose `value` differs from rank 0's, naming `what` and the rank.
  void check_same_on_all_ranks(int64_t value, const std::string& what);

 protected:
  // Rank `rank`'s offset into a reduce-scatter's input; throws one line when `in`, `out`
  // and `counts` (one per rank, none negative) do not fit together.
  static int64_t scatter_offset(const Tensor& in, const Tensor& out,
                                const std::vector<int64_t>& counts, int rank, int size);
  CommWorker& worker();

 private:
  std::unique_ptr<CommWorker> worker_;
};

// The words of --comm, in the order --help lists them.
inline const std::vector<std::string>& communicator_backends() {
  static const std::vector<std::string> words = {"auto", "mpi", "nccl", "emu", "local"};
  return words;
}
// The backend `requested` (one of communicator_backends()) means for a process that
// an MPI launcher started (or not) and whose tensors live on `device`: "auto" is "local"
// for a single process, "mpi" for CPU tensors under a launcher, and the device collective
// for device tensors under a launcher (MPI cannot carry them): "nccl" on a GPU, "emu" on
// the emulated device. Unknown names and combinations that
// cannot work ("mpi" with device tensors) are one-line errors naming --comm.
std::string resolve_backend(const std::string& requested, bool launched, const Device& device);

// The communicator for --comm `backend` and --device `device` (parse_device's spelling;
// the device is resolved with the MPI placement, so "cuda" is this rank's local GPU).
// "nccl" and "emu" are SplitCommunicators: host tensors over MPI, device tensors over NCCL
// or the emulated collective (comm/emu_communicator.cpp).
// The device a run's tensors live on: --device, except that "--comm nccl" / "--comm emu"
// without a device mean this rank's GPU / emulated device.
std::string device_for_backend(const std::string& backend, const std::string& device);
// Whether MPI must start at MPI_THREAD_MULTIPLE: the emulated collective uses MPI from its
// stream while the host plane may too.
bool needs_mpi_thread_multiple(const std::string& backend, const std::string& device);
std::unique_ptr<Communicator> make_communicator(const std::string& backend = "auto",
                                                const std::string& device = "cpu");
// The same, on an MPI bootstrap the caller already started (agree_on_launch,
// comm/launch_agreement.h); null starts one.
std::unique_ptr<Communicator> make_communicator(const std::string& backend,
                                                const std::string& device,
                                                std::unique_ptr<MpiCommunicator> bootstrap);

// One line saying where this process runs: its rank, the host name and its node-local
// rank (--print-placement; the emulated multi-host test reads it).
std::string describe_placement(const Communicator& comm);

// True when this process was started by an MPI launcher (mpirun, srun).
bool launched_by_mpi();

}  // namespace st
