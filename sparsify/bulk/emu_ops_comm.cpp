// EmuOps: collectives on buffers. The emulated collective backend takes the device
// buffers themselves; any other backend (MPI, Local) takes host tensors, so the buffers
// are staged through the host, as CudaOps does with NCCL and the others.
#include "comm/communicator.h"
#include "core/emu/stream.h"
#include "sparsify/bulk/emu_ops.h"
#include "sparsify/bulk/host_staging.h"

namespace st::bulk {

namespace {

DType dtype_for(Elem e) {
  return e == Elem::F32 ? DType::F32 : DType::I32;
}

// Runs `op` on tensors the communicator accepts, after this thread's stream has finished
// writing them: the device views for the emulated backend (its own stream is done when
// the call returns), host copies for the others, whose results (`outputs`) are copied back.
template <typename Op>
void on_comm_tensors(Communicator& comm, emu::Stream& s, std::vector<Tensor*> inputs,
                     std::vector<Tensor*> outputs, Op op) {
  s.synchronize();
  if (comm.backend() == "emu")
    op();
  else
    on_host_copies(inputs, outputs, op);
}

}  // namespace

void EmuOps::allreduce_sum(Communicator& comm, Buffer& b) {
  if (b.empty()) return;
  Tensor t = view(b);
  on_comm_tensors(comm, stream(), {}, {&t}, [&] { comm.allreduce(t); });
}

void EmuOps::allgatherv(Communicator& comm, const Buffer& in, const std::vector<int64_t>& counts,
                        Buffer& out) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  ST_CHECK(static_cast<int64_t>(counts.size()) == comm.size() &&
               counts[static_cast<size_t>(comm.rank())] == in.size(),
           "bulk::EmuOps::allgatherv: rank ", comm.rank(), " sends ", in.size(),
           " elements but its count says otherwise");
  target().resize(out, in.elem(), total);
  if (total == 0) return;
  Tensor src = in.empty() ? Tensor::empty({0}, dtype_for(in.elem()), device_) : view(in);
  Tensor dst = view(out);
  on_comm_tensors(comm, stream(), {&src}, {&dst}, [&] { comm.allgatherv(src, dst, counts); });
}

void EmuOps::broadcast(Communicator& comm, Buffer& b, int root) {
  if (b.empty()) return;
  Tensor t = view(b);
  // The root's values travel, so the host copy (other backends) must hold them too.
  on_comm_tensors(comm, stream(), {}, {&t}, [&] { comm.broadcast(t, root); });
}

void EmuOps::allgather(Communicator& comm, const Buffer& in, Buffer& out) {
  target().resize(out, in.elem(), in.size() * comm.size());
  if (in.empty()) return;
  Tensor src = view(in);
  Tensor dst = view(out);
  on_comm_tensors(comm, stream(), {&src}, {&dst}, [&] { comm.allgather(src, dst); });
}

}  // namespace st::bulk
