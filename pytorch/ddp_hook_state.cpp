#include "pytorch/ddp_hook_state.h"

#include "core/error.h"
#include "layers/param.h"
#include "sparsify/hook_checkpoint.h"
#include "sparsify/registry.h"
#include "train/config.h"
#include "train/exchange_setup.h"
#include "train/flags.h"

namespace st {

namespace {

SparsifierOptions sparsifier_options(const DdpHookOptions& o) {
  SparsifierOptions so;
  so.density = o.density;
  so.seed = o.seed;
  so.params = o.sp;
  return so;
}

// The CLI's flag table holds the ranges of density and the warm-up: the same checks.
const DdpHookOptions& checked(const DdpHookOptions& o) {
  TrainConfig c;
  c.sparsifier = o.method;
  c.density = o.density;
  c.dense_warmup_iters = o.dense_warmup_iters;
  c.sparsifier_params = o.sp;
  check_flag_ranges(c);
  ST_CHECK(o.world_size >= 1, "world_size must be at least 1, got ", o.world_size);
  return o;
}

}  // namespace

DdpHookState::DdpHookState(const DdpHookOptions& options)
    : opt_(checked(options)),
      hook_(make_sparsifier(opt_.method, sparsifier_options(opt_)), sparsifier_options(opt_),
            opt_.dense_warmup_iters) {}

void DdpHookState::check_group(const Communicator& comm) const {
  ST_CHECK(comm.size() == opt_.world_size, "the process group has ", comm.size(),
           " ranks but this HookState was made for world_size ", opt_.world_size,
           " (make one per group, or load_state_dict to re-split)");
}

void DdpHookState::exchange(int index, Tensor& grads, const std::vector<DdpTensor>& tensors,
                            Communicator& comm, int64_t iteration) {
  check_group(comm);
  const Tensor r = hook_.residual(index);
  ST_CHECK(!r.defined() || r.numel() == 0 || r.numel() == grads.numel(), "bucket ", index, " has ",
           grads.numel(), " elements but its residual ", r.numel(),
           " (load a state_dict saved with the same model and bucket_cap_mb)");
  // The bucket's tensors as parameters whose gradients are views of the buffer: tensor
  // scope finds them there (SparsifyHook::tensor_segments).
  std::vector<Param> params(tensors.size());
  Bucket bucket;
  bucket.id = index;
  bucket.numel = grads.numel();
  for (size_t i = 0; i < tensors.size(); ++i) {
    Shape shape(tensors[i].shape);
    params[i].grad = grads.slice_flat(tensors[i].offset, shape);
    bucket.params.push_back(&params[i]);
  }
  hook_.exchange(bucket, grads, comm, iteration);
}

void DdpHookState::finish_step() {
  const std::vector<SparsifyStats> stats = hook_.take_stats();
  if (stats.empty()) return;
  last_.clear();
  add_sparsify_metrics(stats, last_);
}

void DdpHookState::load_rows(const std::vector<std::vector<uint8_t>>& rows, Communicator& comm) {
  ST_CHECK(!rows.empty(), "load_state_dict: the state holds no rank's row");
  const std::string what = "load_state_dict";
  restore_hook_rows(
      hook_, static_cast<int>(rows.size()),
      [&](int q) {
        const auto& row = rows[static_cast<size_t>(q)];
        return StateReader(row.data(), row.size(), what);
      },
      what, comm);
  opt_.world_size = comm.size();
}

}  // namespace st
