// NcclCommunicator: collectives on CUDA tensors through NCCL, one process per GPU, on the
// GPU the process chose (--device). The NCCL unique id travels from rank 0 to the others
// over MPI (the bootstrap NCCL leaves to the launcher); host tensors never reach NCCL:
// make_communicator pairs this backend with its MPI bootstrap in a SplitCommunicator.
// Each collective runs on the communicator's own stream after the calling thread's current
// stream (an event wait: NCCL's stream is ordered with nothing else) and completes before
// the call returns, matching the MPI backend's blocking contract; the reducer orders the
// calling thread after the gradients by waiting on an event from the compute stream.
//
// Failures end the whole job, as on the MPI path: an NCCL error, or a peer that died (NCCL
// reports it as the communicator's asynchronous error while the stream waits), aborts the
// NCCL communicator (ncclCommAbort: no other rank stays blocked in it) and throws an error
// naming this rank; the program's handler then prints it and calls MPI_Abort. The wait
// polls the stream and that error with the MPI path's back-off instead of blocking in the
// driver, which could never notice a dead peer.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "comm/mpi_communicator.h"
#include "comm/mpi_wait.h"
#include "core/cuda/check.h"
#include "core/cuda/stream.h"

namespace st {

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat32;
    case DType::I32:
      return ncclInt32;
    case DType::I64:
      return ncclInt64;
    case DType::BF16:
      return ncclBfloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
  }
  return ncclSum;
}

void require_cuda(const Tensor& t, const char* op) {
  ST_CHECK(t.device().is_cuda(), "NCCL ", op, ": tensor ", t.str(),
           " is not on a GPU (NCCL takes device memory only; host tensors go to MPI)");
}

// Device memory only: host tensors (the control plane) go to the MPI bootstrap through the
// SplitCommunicator that make_communicator builds around this one.
class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device) : mpi_(&bootstrap), device_(device) {
    const int devices = cuda_device_count();
    ST_CHECK(devices > 0, "NCCL backend: rank ", mpi_->rank(), " sees no CUDA device");
    ST_CHECK(device >= 0 && device < devices, "NCCL backend: rank ", mpi_->rank(),
             " asked for GPU ", device, " but sees ", devices);
    cuda::DeviceGuard guard(device_);
    stream_ = std::make_unique<cuda::Stream>(device_);
    ready_ = std::make_unique<cuda::Event>(device_);
    ncclUniqueId id{};
    if (mpi_->rank() == 0) ST_NCCL_CHECK(ncclGetUniqueId(&id));
    static_assert(sizeof(ncclUniqueId) % 4 == 0, "unique id is a whole number of int32");
    Tensor blob = Tensor::empty({static_cast<int64_t>(sizeof(id) / 4)}, DType::I32);
    std::memcpy(blob.raw(), &id, sizeof(id));
    mpi_->broadcast(blob, 0);
    std::memcpy(&id, blob.raw(), sizeof(id));
    ST_NCCL_CHECK(ncclCommInitRank(&comm_, mpi_->size(), id, mpi_->rank()));
  }
  ~NcclCommunicator() override {
    wait_idle();
    if (comm_) ncclCommDestroy(comm_);
  }
  NodePlacement placement() const override { return mpi_->placement(); }

  std::string backend() const override { return "nccl"; }
  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }

  void allreduce(Tensor& t, ReduceOp op) override {
    require_cuda(t, "allreduce");
    cuda::DeviceGuard guard(device_);
    after_callers_stream();
    check("ncclAllReduce", ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()),
                                         nccl_type(t.dtype()), nccl_op(op), comm_, stream_->get()));
    wait("allreduce");
  }
  void allgather(const Tensor& in, Tensor& out) override {
    require_cuda(in, "allgather");
    require_cuda(out, "allgather");
    ST_CHECK(out.numel() == in.numel() * size(), "NCCL allgather: output ", out.str(),
             " cannot hold ", size(), " x ", in.str());
    cuda::DeviceGuard guard(device_);
    after_callers_stream();
    check("ncclAllGather", ncclAllGather(in.raw(), out.raw(), static_cast<size_t>(in.numel()),
                                         nccl_type(in.dtype()), comm_, stream_->get()));
    wait("allgather");
  }
  // NCCL has no allgatherv: each rank broadcasts its part into place, grouped.
  void allgatherv(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts) override {
    require_cuda(in, "allgatherv");
    require_cuda(out, "allgatherv");
    ST_CHECK(static_cast<int>(counts.size()) == size() && counts[rank()] == in.numel(),
             "NCCL allgatherv: counts do not match rank ", rank(), "'s input ", in.str());
    cuda::DeviceGuard guard(device_);
    after_callers_stream();
    const size_t elem = dtype_size(in.dtype());
    char* base = static_cast<char*>(out.raw());
    int64_t offset = 0;
    check("ncclGroupStart", ncclGroupStart());
    for (int r = 0; r < size(); ++r) {
      const void* send = r == rank() ? in.raw() : nullptr;
      check("ncclBroadcast",
            ncclBroadcast(send, base + offset * elem, static_cast<size_t>(counts[r]),
                          nccl_type(in.dtype()), r, comm_, stream_->get()));
      offset += counts[r];
    }
    check("ncclGroupEnd", ncclGroupEnd());
    wait("allgatherv");
  }
  // The node level of the two-level exchange. ncclReduceScatter takes equal parts only, so
  // each rank's part is an ncclReduce to that rank, grouped: summed on the device, with no
  // full allreduce and no copy through the host.
  void reduce_scatter(const Tensor& in, Tensor& out, const std::vector<int64_t>& counts) override {
    require_cuda(in, "reduce_scatter");
    require_cuda(out, "reduce_scatter");
    scatter_offset(in, out, counts, rank(), size());  // checks that they fit
    cuda::DeviceGuard guard(device_);
    after_callers_stream();
    const size_t elem = dtype_size(in.dtype());
    const char* base = static_cast<const char*>(in.raw());
    int64_t offset = 0;
    check("ncclGroupStart", ncclGroupStart());
    for (int r = 0; r < size(); ++r) {
      const size_t n = static_cast<size_t>(counts[static_cast<size_t>(r)]);
      check("ncclReduce", ncclReduce(base + offset * elem, r == rank() ? out.raw() : nullptr, n,
                                     nccl_type(in.dtype()), ncclSum, r, comm_, stream_->get()));
      offset += static_cast<int64_t>(n);
    }
    check("ncclGroupEnd", ncclGroupEnd());
    wait("reduce_scatter");
  }
  void broadcast(Tensor& t, int root) override {
    require_cuda(t, "broadcast");
    cuda::DeviceGuard guard(device_);
    after_callers_stream();
    check("ncclBroadcast", ncclBroadcast(t.raw(), t.raw(), static_cast<size_t>(t.numel()),
                                         nccl_type(t.dtype()), root, comm_, stream_->get()));
    wait("broadcast");
  }
  void barrier() override { mpi_->barrier(); }
  std::vector<std::string> gather_bytes(const std::string& mine, int root) override {
    return mpi_->gather_bytes(mine, root);
  }

 private:
  // NCCL's stream is ordered with nothing else: the collective's input was written on the
  // calling thread's current stream (a 16-bit pack, a scaling, the backward pass), so the
  // NCCL stream waits for everything queued there so far before it reads it.
  void after_callers_stream() {
    ready_->record(cuda::current_stream(device_));
    stream_->wait(*ready_);
  }
  // Aborts the NCCL communicator, so no peer stays blocked in it, and throws naming the rank.
  [[noreturn]] void fail(const std::string& call, const std::string& why) {
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
    ST_THROW("NCCL ", call, " failed on rank ", rank(), " of ", size(), ": ", why,
             " (NCCL communicator aborted)");
  }
  void check(const char* call, ncclResult_t r) {
    if (r != ncclSuccess && r != ncclInProgress) fail(call, ncclGetErrorString(r));
  }
  // Until the stream has finished: a device error or NCCL's asynchronous error (a dead
  // peer, a broken connection) ends the wait with fail().
  void wait(const char* what) {
    const Backoff backoff;
    for (int64_t polls = 0;; ++polls) {
      const cudaError_t state = cudaStreamQuery(stream_->get());
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) fail(what, cudaGetErrorString(state));
      ncclResult_t async = ncclSuccess;
      check("ncclCommGetAsyncError", ncclCommGetAsyncError(comm_, &async));
      check(what, async);
      backoff.pause_for(polls);  // spins, yields or sleeps
    }
  }

  Communicator* mpi_;
  int device_ = 0;
  std::unique_ptr<cuda::Stream> stream_;
  std::unique_ptr<cuda::Event> ready_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device) {
  return std::make_unique<NcclCommunicator>(bootstrap, device);
}

}  // namespace st
