#include "sparsify/host_select.h"

#include "sparsify/device_state.h"

namespace st {

namespace {

template <class T>
void download_all(bulk::Ops& ops, const bulk::Buffer& b, std::vector<T>& out) {
  out.resize(static_cast<size_t>(b.size()));
  ops.download(b, 0, b.size(), out.data());
}

}  // namespace

void select_on_host(Sparsifier& sp, const SelectContext& ctx, const float* x, int64_t n,
                    Selection& out, const float* grad_host, const float* aux_host) {
  bulk::Ops& ops = thread_cpu_ops();
  bulk::Buffer xb, grad, aux;
  ops.upload(x, bulk::Elem::F32, n, xb);
  SelectContext c = ctx;
  if (grad_host) {
    ops.upload(grad_host, bulk::Elem::F32, n, grad);
    c.grad_buffer = &grad;
  }
  if (aux_host) {
    ops.upload(aux_host, bulk::Elem::F32, n, aux);
    c.aux_buffer = &aux;
  }
  DeviceSelection sel;
  sp.select_on(ops, c, xb, sel);
  download_all(ops, sel.indices, out.indices);
  download_all(ops, sel.values, out.values);
  download_all(ops, sel.packed, out.packed);
  out.threshold = sel.threshold;
  out.partition_ms = sel.partition_ms;
  out.estimate_ms = sel.estimate_ms;
}

}  // namespace st
