// DdpHookState: the CLI's SparsifyHook behind PyTorch DDP's comm hook, in the project's
// own types (the torch-facing code is pytorch/module.cpp). DDP hands the hook one bucket
// at a time, keyed by its index; the bucket's flat float32 buffer is exchanged in place,
// and its gradients' offsets give the tensors of --sp scope=tensor. The state's world size
// is fixed when it is made; a process group of another size is refused.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "sparsify/sparsify_hook.h"
#include "train/metrics.h"

namespace st {

// One tensor of a DDP bucket: where it starts in the flat buffer (elements) and its shape.
struct DdpTensor {
  int64_t offset = 0;
  std::vector<int64_t> shape;
};

// The arguments of HookState, as sparsetrain_torch takes them.
struct DdpHookOptions {
  std::string method;
  double density = 0.01;
  std::map<std::string, std::string> sp;
  uint64_t seed = 0;
  int64_t dense_warmup_iters = 0;
  int world_size = 1;
};

class DdpHookState {
 public:
  // Throws one line for an unknown method, an unknown --sp key or a value out of range.
  explicit DdpHookState(const DdpHookOptions& options);

  const DdpHookOptions& options() const { return opt_; }
  // The bucket `index` (a float32 host tensor, exchanged in place, `tensors` inside it) at
  // DDP iteration `iteration`: on return it holds the average every rank applies.
  void exchange(int index, Tensor& grads, const std::vector<DdpTensor>& tensors, Communicator& comm,
                int64_t iteration);
  // Closes an iteration: its buckets' statistics become stats().
  void finish_step();
  // The sp_* columns of the last finished iteration (empty before the first).
  const MetricRow& stats() const { return last_; }
  // This rank's checkpoint stream (SparsifyHook::save_state).
  std::vector<uint8_t> save_row() const { return hook_.save_state(); }
  // This rank's state from every old rank's stream, re-split for another world size by
  // the CLI's rules or refused in one line. Collective when the world size changed.
  void load_rows(const std::vector<std::vector<uint8_t>>& rows, Communicator& comm);
  // The bucket's error-feedback residual (zeros before its first exchange).
  Tensor residual(int index) const { return hook_.residual(index); }

 private:
  void check_group(const Communicator& comm) const;

  DdpHookOptions opt_;
  SparsifyHook hook_;
  MetricRow last_;
};

}  // namespace st
