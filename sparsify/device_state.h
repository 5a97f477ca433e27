// Rule state a sparsifier keeps on the bulk device between iterations (DGC's velocity and
// accumulation, VGC's variances, PowerSGD's warm-start Q): a Buffer of floats, created or
// refilled on the device, with host copies only for checkpoints and tests.
//
// The Ops of the latest bind() does the device work. Reading the state outside a
// select_on() (save_state, state_signature, tests) downloads through that Ops for a CUDA
// buffer and through a CPU implementation of this thread for a CPU buffer, so a caller
// that selected with a short-lived CpuOps (tests, fuzz targets) leaves nothing dangling.
#pragma once

#include <cstdint>
#include <vector>

#include "sparsify/bulk/bulk_ops.h"
#include "sparsify/state_io.h"

namespace st {

class DeviceState {
 public:
  // Makes the state n floats on ops' device: a restored checkpoint's values when they
  // have n entries, else (first use, or another size) zeros, or `init` when given.
  // Returns true when the state was (re)made rather than kept.
  bool bind(bulk::Ops& ops, int64_t n, const std::vector<float>* init = nullptr);
  // Makes the state exactly `v` on ops' device.
  void assign(bulk::Ops& ops, const std::vector<float>& v);
  bulk::Buffer& buf() { return buf_; }
  const bulk::Buffer& buf() const { return buf_; }
  bool empty() const { return buf_.empty() && loaded_.empty(); }
  int64_t size() const { return buf_.empty() ? static_cast<int64_t>(loaded_.size()) : buf_.size(); }
  // The ops of the latest bind() (null before the first).
  bulk::Ops* ops() const { return ops_; }
  // A host copy (the restored values before the first bind()).
  std::vector<float> host() const;
  void save(StateWriter& out) const { out.put_vector(host()); }
  void load(StateReader& in);

 private:
  bulk::Ops* ops_ = nullptr;
  bool on_cpu_ = true;
  bulk::Buffer buf_;
  std::vector<float> loaded_;  // from a checkpoint, uploaded by the next bind()
};

// A CPU implementation of bulk::Ops that lives as long as the calling thread
// (select_on_host, state reads of CPU buffers): rule state that remembers its Ops stays
// valid from one call to the next.
bulk::Ops& thread_cpu_ops();

}  // namespace st
