#include "comm/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "comm/local_communicator.h"
#include "comm/mpi_communicator.h"
#include "comm/split_communicator.h"
#include "core/error.h"
#include "core/word_list.h"

namespace st {

Communicator::~Communicator() = default;

CommWorker& Communicator::worker() {
  if (!worker_) worker_ = std::make_unique<CommWorker>();
  return *worker_;
}

Work Communicator::allreduce_async(Tensor& t, ReduceOp op) {
  return worker().submit([this, t, op]() mutable { allreduce(t, op); });
}

Work Communicator::allgather_async(const Tensor& in, Tensor& out) {
  return worker().submit([this, in, out]() mutable { allgather(in, out); });
}

Work Communicator::broadcast_async(Tensor& t, int root) {
  return worker().submit([this, t, root]() mutable { broadcast(t, root); });
}

Work Communicator::submit(std::function<void()> fn) {
  return worker().submit(std::move(fn));
}

void Communicator::wait_idle() {
  if (worker_) worker_->wait_idle();
}

int64_t Communicator::scatter_offset(const Tensor& in, const Tensor& out,
                                     const std::vector<int64_t>& counts, int rank, int size) {
  ST_CHECK(static_cast<int>(counts.size()) == size, "reduce_scatter: ", counts.size(),
           " counts for ", size, " ranks");
  int64_t offset = 0, total = 0;
  for (int r = 0; r < size; ++r) {
    ST_CHECK(counts[r] >= 0, "reduce_scatter: negative count for rank ", r);
    if (r < rank) offset += counts[r];
    total += counts[r];
  }
  ST_CHECK(total == in.numel() && out.numel() == counts[rank] && out.dtype() == in.dtype(),
           "reduce_scatter: input ", in.str(), " and output ", out.str(), " do not fit counts of ",
           total, " elements (rank ", rank, ": ", counts[rank], ")");
  return offset;
}

void Communicator::reduce_scatter(const Tensor& in, Tensor& out,
                                  const std::vector<int64_t>& counts) {
  const int64_t offset = scatter_offset(in, out, counts, rank(), size());
  Tensor sum = in.clone();
  allreduce(sum, ReduceOp::Sum);
  out.copy_from(sum.slice_flat(offset, {counts[rank()]}));
}

std::unique_ptr<Communicator> Communicator::split(int, int) {
  ST_THROW("the ", backend(), " communicator cannot be split into groups");
}

double Communicator::allreduce_scalar(double v, ReduceOp op) {
  // float64 is not a tensor dtype here; two floats keep ~14 significant digits.
  const float hi = static_cast<float>(v);
  Tensor t = Tensor::from_vector({hi, static_cast<float>(v - hi)}, {2});
  if (op == ReduceOp::Sum) {
    allreduce(t, op);
    return static_cast<double>(t.f32()[0]) + t.f32()[1];
  }
  Tensor one = Tensor::from_vector({hi}, {1});
  allreduce(one, op);
  return one.f32()[0];
}

void Communicator::check_same_on_all_ranks(int64_t value, const std::string& what) {
  Tensor mine = Tensor::zeros({1}, DType::I64);
  mine.data<int64_t>()[0] = value;
  Tensor all = Tensor::zeros({size()}, DType::I64);
  allgather(mine, all);
  const int64_t* v = all.data<int64_t>();
  for (int r = 1; r < size(); ++r)
    ST_CHECK(v[r] == v[0], what, " differs between ranks: rank 0 has ", v[0], ", rank ", r, " has ",
             v[r]);
}

std::string describe_placement(const Communicator& comm) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "?");
  const NodePlacement p = comm.placement();
  return "placement: rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) +
         " on host " + host + ", node-local rank " + std::to_string(p.local_rank) + " of " +
         std::to_string(p.local_size);
}

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

std::string resolve_backend(const std::string& requested, bool launched, const Device& device) {
  const std::vector<std::string>& words = communicator_backends();
  if (std::find(words.begin(), words.end(), requested) == words.end()) {
    ST_THROW("--comm: unknown backend '", requested, "' (", word_list(words), ")");
  }
  // The device collective for the tensors' device: NCCL on a GPU, the emulated one on emu.
  const char* device_backend = device.is_emu() ? "emu" : "nccl";
  if (requested == "auto") {
    if (!launched) return "local";
    return device.is_cpu() ? "mpi" : device_backend;
  }
  ST_CHECK(requested != "mpi" || device.is_cpu(), "--comm mpi carries host memory only, not ",
           device.str(), " tensors: use --comm ", device_backend, " (or auto) with --device ",
           device.str());
  ST_CHECK(requested != "nccl" || device.is_cuda(),
           "--comm nccl carries GPU memory only: use it with --device cuda, not ", device.str());
  ST_CHECK(requested != "emu" || device.is_emu(),
           "--comm emu carries emulated device memory only: use it with --device emu, not ",
           device.str());
  return requested;
}

std::string device_for_backend(const std::string& backend, const std::string& device) {
  if (device == "cpu" && (backend == "nccl" || backend == "emu"))
    return backend == "nccl" ? "cuda" : "emu";
  return device;
}

bool needs_mpi_thread_multiple(const std::string& backend, const std::string& device) {
  return device_for_backend(backend, device).rfind("emu", 0) == 0;
}

std::unique_ptr<Communicator> make_communicator(const std::string& backend,
                                                const std::string& device) {
  return make_communicator(backend, device, nullptr);
}

std::unique_ptr<Communicator> make_communicator(const std::string& backend,
                                                const std::string& device,
                                                std::unique_ptr<MpiCommunicator> bootstrap) {
  const bool launched = launched_by_mpi();
  if (backend == "local" || (backend == "auto" && !launched)) {
    // Several ranks that each run alone would share --out and never exchange a gradient.
    ST_CHECK(!bootstrap || bootstrap->size() == 1, "--comm local runs one process alone, but the ",
             "launcher started ", bootstrap ? bootstrap->size() : 1,
             " ranks: use --comm auto (or mpi) under mpirun");
    // One process: no collective library, whatever the device (checked where it is used).
    resolve_backend(backend, launched, Device::cpu());
    return std::make_unique<LocalCommunicator>();
  }
  const std::string spec = device_for_backend(backend, device);
  // A device index needs the node placement, which the MPI bootstrap knows.
  std::unique_ptr<MpiCommunicator> host =
      bootstrap ? std::move(bootstrap)
                : std::make_unique<MpiCommunicator>(needs_mpi_thread_multiple(backend, device));
  const Device d = parse_device(spec, host->placement());
  const std::string resolved = resolve_backend(backend, launched, d);
  if (resolved == "mpi") return host;
  // The device library's setup switches to this rank's device and back: set the process's
  // device first, or "back" is device 0 and every rank opens a context there (on a GPU in
  // EXCLUSIVE_PROCESS mode, all ranks but one then fail).
  set_process_device(d);
  SplitCommunicator::DeviceFactory on_device_of = [emu = resolved == "emu",
                                                   index = d.index](MpiCommunicator& bootstrap) {
    return emu ? make_emu_communicator(bootstrap, index) : make_nccl_communicator(bootstrap, index);
  };
  auto on_device = on_device_of(*host);
  return std::make_unique<SplitCommunicator>(std::move(host), std::move(on_device), on_device_of);
}

}  // namespace st
