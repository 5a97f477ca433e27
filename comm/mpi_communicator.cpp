#include "comm/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "comm/mpi_check.h"
#include "comm/mpi_wait.h"

namespace st {

namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::I32:
      return MPI_INT32_T;
    case DType::I64:
      return MPI_INT64_T;
    case DType::BF16:  // moved as bits; reductions refuse it (no MPI bfloat16 type)
      return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_OP_NULL;
}

void require_cpu(const Tensor& t, const char* op) {
  ST_CHECK(t.device().is_cpu(), "MPI ", op, ": tensor ", t.str(),
           " is not on the CPU (use the NCCL backend for CUDA tensors)");
}

int as_count(int64_t n, const char* op) {
  ST_CHECK(n <= INT32_MAX, "MPI ", op, ": ", n, " elements exceed MPI's int count");
  return static_cast<int>(n);
}

// The processes sharing this node's memory (MPI_COMM_TYPE_SHARED) give the node-local
// rank; should that split fail, the launcher's variables (Open MPI, SLURM, MPICH) do.
NodePlacement find_placement(int rank) {
  NodePlacement p;
  p.rank = rank;
  MPI_Comm node;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) ==
      MPI_SUCCESS) {
    MPI_Comm_rank(node, &p.local_rank);
    MPI_Comm_size(node, &p.local_size);
    MPI_Comm_free(&node);
    return p;
  }
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                            {"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
                            {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"}};
  for (const auto& [rank_var, size_var] : pairs) {
    const char* r = std::getenv(rank_var);
    const char* n = std::getenv(size_var);
    if (r && n) {
      p.local_rank = std::atoi(r);
      p.local_size = std::atoi(n);
      return p;
    }
  }
  return p;
}

}  // namespace

MpiCommunicator::MpiCommunicator(bool threads_at_once) {
  int initialized = 0;
  ST_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    const int want = threads_at_once ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
    int provided = 0;
    ST_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, want, &provided));
    owns_init_ = true;
    ST_CHECK(provided >= want, "MPI: the library provides thread level ", provided,
             ", this run needs ",
             threads_at_once ? "MPI_THREAD_MULTIPLE" : "MPI_THREAD_SERIALIZED");
  }
  ST_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  ST_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  ST_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  placement_ = find_placement(rank_);
}

MpiCommunicator::~MpiCommunicator() {
  wait_idle();
  shared_.reset();  // its window lives on comm_
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_WORLD && !finalized) MPI_Comm_free(&comm_);
  if (owns_init_ && !finalized) MPI_Finalize();
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::duplicate() const {
  std::unique_ptr<MpiCommunicator> d(new MpiCommunicator(*this, Dup{}));
  return d;
}

MpiCommunicator::MpiCommunicator(const MpiCommunicator& parent, Dup)
    : rank_(parent.rank_), size_(parent.size_), placement_(parent.placement_) {
  ST_MPI_CHECK(MPI_Comm_dup(parent.comm_, &comm_));
  ST_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

MpiCommunicator::MpiCommunicator(const MpiCommunicator& parent, MPI_Comm comm)
    : comm_(comm), placement_(parent.placement_) {
  ST_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  ST_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  ST_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split_mpi(int color, int key) {
  ST_CHECK(color >= 0, "MPI split: color ", color, " must not be negative");
  MPI_Comm sub = MPI_COMM_NULL;
  ST_MPI_CHECK(MPI_Comm_split(comm_, color, key, &sub));
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(*this, sub));
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  return split_mpi(color, key);
}

SharedSegments* MpiCommunicator::shared_segments() {
  if (!shared_decided_) {
    shared_ = MpiSharedSegments::create(comm_);
    shared_decided_ = true;
  }
  return shared_.get();
}

// Open MPI's reduce-scatter of a large buffer reduces through intermediate copies, several
// times slower than sending each rank its part with one all-to-all and summing the P parts
// here, which moves the same bytes (the two-level exchange's step inside a node,
// docs/results/two_level.md). The sum runs in rank order, so the result is reproducible.
void MpiCommunicator::reduce_scatter(const Tensor& in, Tensor& out,
                                     const std::vector<int64_t>& counts) {
  require_cpu(in, "reduce_scatter");
  require_cpu(out, "reduce_scatter");
  ST_CHECK(static_cast<int>(counts.size()) == size_, "MPI reduce_scatter: ", counts.size(),
           " counts for ", size_, " ranks");
  ST_CHECK(in.dtype() == DType::F32 && out.dtype() == DType::F32,
           "MPI reduce_scatter: float32 tensors only, got ", in.str(), " and ", out.str());
  const int mine = as_count(counts[rank_], "reduce_scatter");
  std::vector<int> send_counts(size_), send_displs(size_), recv_counts(size_, mine),
      recv_displs(size_);
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    send_counts[r] = as_count(counts[r], "reduce_scatter");
    send_displs[r] = as_count(total, "reduce_scatter");
    recv_displs[r] = as_count(static_cast<int64_t>(r) * mine, "reduce_scatter");
    total += counts[r];
  }
  ST_CHECK(total == in.numel() && out.numel() == mine, "MPI reduce_scatter: input ", in.str(),
           " and output ", out.str(), " do not fit ", total, " elements split as counts (rank ",
           rank_, ": ", mine, ")");
  if (total == 0) return;
  send_copy_.resize(static_cast<size_t>(size_) * mine * sizeof(float));
  auto* parts = reinterpret_cast<float*>(send_copy_.data());
  // The count and displacement arrays must outlive the request: they do (this frame).
  MPI_Request req = MPI_REQUEST_NULL;
  ST_MPI_CHECK(MPI_Ialltoallv(in.raw(), send_counts.data(), send_displs.data(), MPI_FLOAT, parts,
                              recv_counts.data(), recv_displs.data(), MPI_FLOAT, comm_, &req));
  wait_with_backoff(req, "MPI_Ialltoallv");
  float* sum = out.f32();
  std::copy(parts, parts + mine, sum);
  for (int r = 1; r < size_; ++r) {
    const float* part = parts + static_cast<int64_t>(r) * mine;
    for (int i = 0; i < mine; ++i) sum[i] += part[i];
  }
}

void MpiCommunicator::allreduce(Tensor& t, ReduceOp op) {
  require_cpu(t, "allreduce");
  ST_CHECK(t.dtype() != DType::BF16, "allreduce: no MPI sum of bfloat16 tensors (", t.str(), ")");
  if (t.numel() == 0) return;
  const int n = as_count(t.numel(), "allreduce");
  if (size_ == 2) return allreduce_pair(t, n, op);
  // Open MPI's non-blocking allreduce falls back to a binomial tree (everything through
  // rank 0, twice) for in-place buffers; from 4 ranks and 64 KiB on, a copy of the input
  // lets it pick reduce-scatter + allgather, which moves about half as much per rank.
  const size_t bytes = t.nbytes();
  const void* send = MPI_IN_PLACE;
  if (size_ >= 4 && bytes >= 65536) {
    send_copy_.resize(bytes);
    std::memcpy(send_copy_.data(), t.raw(), bytes);
    send = send_copy_.data();
  }
  MPI_Request req = MPI_REQUEST_NULL;
  ST_MPI_CHECK(MPI_Iallreduce(send, t.raw(), n, mpi_type(t.dtype()), mpi_op(op), comm_, &req));
  wait_with_backoff(req, "MPI_Iallreduce");
}

// Two ranks swap their whole buffers at once and both reduce. Open MPI's non-blocking
// allreduce takes a binomial tree below 4 ranks: rank 1 sends to rank 0, which reduces
// and sends the result back, so on a full-duplex link one direction idles while the other
// works and the allreduce takes twice the time its bytes need (docs/RESULTS.md, "Two
// ranks on a full-duplex link"). Both ranks compute x0 op x1 with the same operands in
// the same places, so the results are bit-identical, NaNs under max and min included.
void MpiCommunicator::allreduce_pair(Tensor& t, int n, ReduceOp op) {
  const int peer = 1 - rank_;
  const MPI_Datatype type = mpi_type(t.dtype());
  send_copy_.resize(t.nbytes());
  void* theirs = send_copy_.data();
  MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  ST_MPI_CHECK(MPI_Irecv(theirs, n, type, peer, kPairTag, comm_, &reqs[0]));
  ST_MPI_CHECK(MPI_Isend(t.raw(), n, type, peer, kPairTag, comm_, &reqs[1]));
  wait_with_backoff(reqs[0], "MPI_Irecv (allreduce of 2 ranks)");
  wait_with_backoff(reqs[1], "MPI_Isend (allreduce of 2 ranks)");
  if (rank_ == 0) {
    ST_MPI_CHECK(MPI_Reduce_local(theirs, t.raw(), n, type, mpi_op(op)));
  } else {
    ST_MPI_CHECK(MPI_Reduce_local(t.raw(), theirs, n, type, mpi_op(op)));
    std::memcpy(t.raw(), theirs, t.nbytes());
  }
}

void MpiCommunicator::allgather(const Tensor& in, Tensor& out) {
  require_cpu(in, "allgather");
  require_cpu(out, "allgather");
  ST_CHECK(out.numel() == in.numel() * size_ && out.dtype() == in.dtype(), "MPI allgather: output ",
           out.str(), " cannot hold ", size_, " x ", in.str());
  const int n = as_count(in.numel(), "allgather");
  MPI_Request req = MPI_REQUEST_NULL;
  ST_MPI_CHECK(MPI_Iallgather(in.raw(), n, mpi_type(in.dtype()), out.raw(), n, mpi_type(in.dtype()),
                              comm_, &req));
  wait_with_backoff(req, "MPI_Iallgather");
}

void MpiCommunicator::allgatherv(const Tensor& in, Tensor& out,
                                 const std::vector<int64_t>& counts) {
  require_cpu(in, "allgatherv");
  require_cpu(out, "allgatherv");
  ST_CHECK(static_cast<int>(counts.size()) == size_, "MPI allgatherv: ", counts.size(),
           " counts for ", size_, " ranks");
  ST_CHECK(counts[rank_] == in.numel(), "MPI allgatherv: rank ", rank_, " sends ", in.numel(),
           " elements but counts say ", counts[rank_]);
  std::vector<int> c(size_), displs(size_);
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    c[r] = as_count(counts[r], "allgatherv");
    displs[r] = as_count(total, "allgatherv");
    total += counts[r];
  }
  ST_CHECK(out.numel() >= total && out.dtype() == in.dtype(), "MPI allgatherv: output ", out.str(),
           " cannot hold ", total, " elements");
  // The count and displacement arrays must outlive the request: they do (this frame).
  MPI_Request req = MPI_REQUEST_NULL;
  ST_MPI_CHECK(MPI_Iallgatherv(in.raw(), c[rank_], mpi_type(in.dtype()), out.raw(), c.data(),
                               displs.data(), mpi_type(in.dtype()), comm_, &req));
  wait_with_backoff(req, "MPI_Iallgatherv");
}

void MpiCommunicator::broadcast(Tensor& t, int root) {
  require_cpu(t, "broadcast");
  ST_CHECK(root >= 0 && root < size_, "MPI broadcast: root ", root, " outside [0, ", size_, ")");
  if (t.numel() == 0) return;
  MPI_Request req = MPI_REQUEST_NULL;
  ST_MPI_CHECK(MPI_Ibcast(t.raw(), as_count(t.numel(), "broadcast"), mpi_type(t.dtype()), root,
                          comm_, &req));
  wait_with_backoff(req, "MPI_Ibcast");
}

void MpiCommunicator::barrier() {
  MPI_Request req = MPI_REQUEST_NULL;
  ST_MPI_CHECK(MPI_Ibarrier(comm_, &req));
  wait_with_backoff(req, "MPI_Ibarrier");
}

std::vector<std::string> MpiCommunicator::gather_bytes(const std::string& mine, int root) {
  ST_CHECK(root >= 0 && root < size_, "MPI gather_bytes: root ", root, " outside [0, ", size_, ")");
  // Sizes first, so the root can place every rank's bytes.
  int n = as_count(static_cast<int64_t>(mine.size()), "gather_bytes");
  std::vector<int> counts(rank_ == root ? size_ : 0), displs(counts.size());
  MPI_Request req = MPI_REQUEST_NULL;
  ST_MPI_CHECK(MPI_Igather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm_, &req));
  wait_with_backoff(req, "MPI_Igather");
  int64_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    displs[r] = as_count(total, "gather_bytes");
    total += counts[r];
  }
  std::string all(static_cast<size_t>(as_count(total, "gather_bytes")), '\0');
  ST_MPI_CHECK(MPI_Igatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(),
                            MPI_CHAR, root, comm_, &req));
  wait_with_backoff(req, "MPI_Igatherv");
  std::vector<std::string> out;
  for (size_t r = 0; r < counts.size(); ++r) out.push_back(all.substr(displs[r], counts[r]));
  return out;
}

void MpiCommunicator::abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace st
