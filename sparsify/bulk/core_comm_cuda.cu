// CudaOps: collectives on buffers. NCCL takes the device buffers themselves; the other
// backends (MPI, Local) take host tensors, so the buffers are staged through the host.
#include "comm/communicator.h"
#include "sparsify/bulk/cuda_ops.h"
#include "sparsify/bulk/cuda_ops_detail.cuh"
#include "sparsify/bulk/host_staging.h"

namespace st::bulk {

namespace {

bool is_nccl(const Communicator& comm) {
  return comm.backend() == "nccl";
}

// Runs `op` on tensors the communicator accepts: the device views themselves for NCCL
// (after this thread's stream has finished writing them; NCCL's own stream is done when
// the call returns), host copies for the other backends, whose results (`outputs`, read
// and written in place) are copied back.
template <typename Op>
void on_comm_tensors(Communicator& comm, int device, std::vector<Tensor*> inputs,
                     std::vector<Tensor*> outputs, Op op) {
  cuda::DeviceGuard guard(device);
  ST_CUDA_CHECK(cudaStreamSynchronize(cuda::current_stream(device)));
  if (is_nccl(comm))
    op();
  else
    on_host_copies(inputs, outputs, op);
}

}  // namespace

void CudaOps::allreduce_sum(Communicator& comm, Buffer& b) {
  if (b.empty()) return;
  Tensor t = view(b);
  on_comm_tensors(comm, dev(), {}, {&t}, [&] { comm.allreduce(t); });
}

void CudaOps::allgatherv(Communicator& comm, const Buffer& in, const std::vector<int64_t>& counts,
                         Buffer& out) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  ST_CHECK(static_cast<int64_t>(counts.size()) == comm.size() &&
               counts[static_cast<size_t>(comm.rank())] == in.size(),
           "bulk::CudaOps::allgatherv: rank ", comm.rank(), " sends ", in.size(),
           " elements but its count says otherwise");
  resize(out, in.elem(), total);
  if (total == 0) return;
  Tensor src = in.empty() ? Tensor::empty({0}, detail::dtype_for(in.elem()), device_) : view(in);
  Tensor dst = view(out);
  on_comm_tensors(comm, dev(), {&src}, {&dst}, [&] { comm.allgatherv(src, dst, counts); });
}

void CudaOps::broadcast(Communicator& comm, Buffer& b, int root) {
  if (b.empty()) return;
  Tensor t = view(b);
  // The root's values travel, so the host copy (other backends) must hold them too.
  on_comm_tensors(comm, dev(), {}, {&t}, [&] { comm.broadcast(t, root); });
}

void CudaOps::allgather(Communicator& comm, const Buffer& in, Buffer& out) {
  resize(out, in.elem(), in.size() * comm.size());
  if (in.empty()) return;
  Tensor src = view(in);
  Tensor dst = view(out);
  on_comm_tensors(comm, dev(), {&src}, {&dst}, [&] { comm.allgather(src, dst); });
}

}  // namespace st::bulk
