// MpiCommunicator: collectives over MPI_COMM_WORLD for CPU tensors (Open MPI). MPI is
// initialised with MPI_THREAD_SERIALIZED: collectives may come from the worker thread
// or the caller, never both at once. Every collective is started non-blocking and waited
// for with a back-off (comm/mpi_wait.h), so a thread waiting for its peers sleeps instead
// of spinning on a core the backward pass needs. Errors return (MPI_ERRORS_RETURN) and
// become st::Error naming the call; a failed peer makes mpirun stop the job.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_shared_segments.h"

namespace st {

class MpiCommunicator : public Communicator {
 public:
  // `threads_at_once`: initialise MPI with MPI_THREAD_MULTIPLE (the emulated device's
  // collective runs MPI on its stream while the host plane uses it); when this process
  // initialises MPI. Otherwise MPI_THREAD_SERIALIZED.
  explicit MpiCommunicator(bool threads_at_once = false);
  ~MpiCommunicator() override;
  // The same ranks over a duplicate of this communicator (MPI_Comm_dup: its own message
  // space, so its collectives never match this one's). Every rank must call it.
  std::unique_ptr<MpiCommunicator> duplicate() const;
  std::string backend() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  NodePlacement placement() const override { return placement_; }
  ST_COMMUNICATOR_COLLECTIVES
  void reduce_scatter(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  SharedSegments* shared_segments() override;
  // split() with its concrete type (the device collectives bootstrap over it).
  std::unique_ptr<MpiCommunicator> split_mpi(int color, int key);
  // Ends every process of the job (after printing the reason), as MPI_Abort does.
  [[noreturn]] static void abort_job(int code);

 private:
  struct Dup {};
  MpiCommunicator(const MpiCommunicator& parent, Dup);
  // Over `comm`, a communicator MPI made from the parent's (owned: freed on destruction).
  MpiCommunicator(const MpiCommunicator& parent, MPI_Comm comm);
  // allreduce on exactly 2 ranks: a swap of the buffers, then a local reduction.
  void allreduce_pair(Tensor& t, int n, ReduceOp op);
  // The tag of that swap; no other point-to-point message travels on comm_, and
  // collectives match in a space of their own.
  static constexpr int kPairTag = 7101;
  MPI_Comm comm_ = MPI_COMM_WORLD;
  int rank_ = 0, size_ = 1;
  NodePlacement placement_;
  bool owns_init_ = false;
  // The input of a large allreduce on 4+ ranks (see allreduce), the peer's buffer of an
  // allreduce on 2, or the parts a reduce-scatter receives; one collective at a time runs
  // (THREAD_SERIALIZED), so one buffer serves them all.
  std::vector<std::byte> send_copy_;
  std::unique_ptr<MpiSharedSegments> shared_;  // after the first shared_segments() call
  bool shared_decided_ = false;
};

// NCCL for CUDA tensors on GPU `device`, bootstrapped over `bootstrap` (which must
// outlive it; make_communicator pairs them in a SplitCommunicator). Device memory only.
// Throws naming the reason where the build or machine has no NCCL.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device);
// The emulated device's collective backend on emu:`device`, over a duplicate of
// `bootstrap` (comm/emu_communicator.cpp). Emulated device memory only.
std::unique_ptr<Communicator> make_emu_communicator(const MpiCommunicator& bootstrap, int device);

}  // namespace st
