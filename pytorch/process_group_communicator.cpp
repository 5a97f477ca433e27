#include "pytorch/process_group_communicator.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace st {

namespace {

at::ScalarType scalar_type(DType t) {
  switch (t) {
    case DType::F32:
      return at::kFloat;
    case DType::I32:
      return at::kInt;
    case DType::I64:
      return at::kLong;
    case DType::BF16:
      return at::kBFloat16;
  }
  throw Error("process group: unknown dtype");
}

// The st tensor's memory as an ATen tensor: no copy (the collectives write in place).
at::Tensor aten_view(const Tensor& t, int64_t numel) {
  ST_CHECK(t.device().is_cpu(), "process group collectives take host tensors, not ", t.str());
  return at::from_blob(t.raw(), {numel}, at::TensorOptions().dtype(scalar_type(t.dtype())));
}

c10d::ReduceOp reduce_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return c10d::ReduceOp::SUM;
    case ReduceOp::Max:
      return c10d::ReduceOp::MAX;
    case ReduceOp::Min:
      return c10d::ReduceOp::MIN;
  }
  throw Error("process group: unknown reduce op");
}

void wait(const c10::intrusive_ptr<c10d::Work>& work) {
  work->wait();
}

}  // namespace

ProcessGroupCommunicator::ProcessGroupCommunicator(c10::intrusive_ptr<c10d::ProcessGroup> group)
    : group_(std::move(group)), rank_(group_->getRank()), size_(group_->getSize()) {}

std::string ProcessGroupCommunicator::backend() const {
  return "torch-" + group_->getBackendName();
}

void ProcessGroupCommunicator::allreduce(Tensor& t, ReduceOp op) {
  std::vector<at::Tensor> ts{aten_view(t, t.numel())};
  c10d::AllreduceOptions opt;
  opt.reduceOp = reduce_op(op);
  wait(group_->allreduce(ts, opt));
}

void ProcessGroupCommunicator::allgather(const Tensor& in, Tensor& out) {
  const int64_t n = in.numel();
  ST_CHECK(out.numel() == n * size_, "allgather: output has ", out.numel(), " elements, expected ",
           n * size_);
  std::vector<at::Tensor> ins{aten_view(in, n)};
  std::vector<std::vector<at::Tensor>> outs(1);
  const at::Tensor all = aten_view(out, n * size_);
  for (int r = 0; r < size_; ++r) outs[0].push_back(all.narrow(0, r * n, n));
  wait(group_->allgather(outs, ins));
}

// gloo's allgather takes one size for every rank: each rank's part travels padded to the
// largest count, then the parts close up at their prefix-sum offsets.
void ProcessGroupCommunicator::allgatherv(const Tensor& in, Tensor& out,
                                          const std::vector<int64_t>& counts) {
  ST_CHECK(
      static_cast<int>(counts.size()) == size_ && counts[static_cast<size_t>(rank_)] == in.numel(),
      "allgatherv: counts do not match input ", in.str());
  const int64_t most = std::max<int64_t>(1, *std::max_element(counts.begin(), counts.end()));
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  ST_CHECK(out.numel() == total, "allgatherv: output has ", out.numel(), " elements, expected ",
           total);
  Tensor padded = Tensor::zeros({most}, in.dtype());
  if (in.numel() > 0) std::memcpy(padded.raw(), in.raw(), in.nbytes());
  Tensor all = Tensor::empty({most * size_}, in.dtype());
  allgather(padded, all);
  const size_t width = dtype_size(in.dtype());
  auto* dst = static_cast<char*>(out.raw());
  const auto* src = static_cast<const char*>(all.raw());
  for (int r = 0; r < size_; ++r) {
    const size_t bytes = static_cast<size_t>(counts[static_cast<size_t>(r)]) * width;
    std::memcpy(dst, src + static_cast<size_t>(r * most) * width, bytes);
    dst += bytes;
  }
}

void ProcessGroupCommunicator::broadcast(Tensor& t, int root) {
  ST_CHECK(root >= 0 && root < size_, "broadcast: root ", root, " outside [0, ", size_, ")");
  std::vector<at::Tensor> ts{aten_view(t, t.numel())};
  c10d::BroadcastOptions opt;
  opt.rootRank = root;
  wait(group_->broadcast(ts, opt));
}

void ProcessGroupCommunicator::barrier() {
  wait(group_->barrier());
}

// Every rank's byte count, then the bytes in 4-byte words padded to the longest; the root
// keeps them.
std::vector<std::string> ProcessGroupCommunicator::gather_bytes(const std::string& mine, int root) {
  ST_CHECK(root >= 0 && root < size_, "gather_bytes: root ", root, " outside [0, ", size_, ")");
  Tensor n = Tensor::from_vector_i32({static_cast<int32_t>(mine.size())}, {1});
  Tensor sizes = Tensor::empty({size_}, DType::I32);
  allgather(n, sizes);
  int64_t words = 1;
  for (int r = 0; r < size_; ++r)
    words = std::max<int64_t>(words, (sizes.data<int32_t>()[r] + 3) / 4);
  Tensor buf = Tensor::zeros({words}, DType::I32);
  std::memcpy(buf.raw(), mine.data(), mine.size());
  Tensor all = Tensor::empty({words * size_}, DType::I32);
  allgather(buf, all);
  std::vector<std::string> out;
  if (rank_ != root) return out;
  for (int r = 0; r < size_; ++r)
    out.emplace_back(static_cast<const char*>(all.raw()) + r * words * 4,
                     static_cast<size_t>(sizes.data<int32_t>()[r]));
  return out;
}

}  // namespace st
