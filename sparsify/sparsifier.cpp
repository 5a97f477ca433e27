#include "sparsify/sparsifier.h"

#include "core/error.h"

namespace st {

const char* pattern_name(ExchangePattern p) {
  switch (p) {
    case ExchangePattern::UnionAllreduce:
      return "union-allreduce";
    case ExchangePattern::AllgatherSum:
      return "allgather-sum";
    case ExchangePattern::SharedIndices:
      return "shared-indices";
    case ExchangePattern::LeaderIndices:
      return "leader-indices";
    case ExchangePattern::Dense:
      return "dense";
    case ExchangePattern::LowRank:
      return "low-rank";
  }
  return "?";
}

// Adapters for methods that are not device-ready yet: the host forms on host copies of
// the buffers. They reach buffer memory only through ops (download / upload), so they
// stay correct under any implementation, at the price of the copies.
namespace {

std::vector<float> host_copy(bulk::Ops& ops, const bulk::Buffer& b, int64_t begin, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  ops.download(b, begin, n, v.data());
  return v;
}

void check_cpu(bulk::Ops& ops, const Sparsifier& sp) {
  ST_CHECK(ops.device().is_cpu(), "--sparsifier ", sp.name(),
           " is not device-ready: it runs on CPU buckets only");
}

void upload_selection(bulk::Ops& ops, const Selection& sel, DeviceSelection& out) {
  ops.upload(sel.indices.data(), bulk::Elem::I32, static_cast<int64_t>(sel.indices.size()),
             out.indices);
  ops.upload(sel.values.data(), bulk::Elem::F32, static_cast<int64_t>(sel.values.size()),
             out.values);
  ops.upload(sel.packed.data(), bulk::Elem::U32, static_cast<int64_t>(sel.packed.size()),
             out.packed);
}

}  // namespace

void Sparsifier::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                           DeviceSelection& out) {
  check_cpu(ops, *this);
  const int64_t n = x.size();
  const std::vector<float> host = host_copy(ops, x, 0, n);
  SelectContext c = ctx;
  std::vector<float> grad, aux;
  if (ctx.grad_buffer) {
    grad = host_copy(ops, *ctx.grad_buffer, 0, ctx.grad_buffer->size());
    c.grad = grad.data();
  }
  if (ctx.aux_buffer) {
    aux = host_copy(ops, *ctx.aux_buffer, 0, ctx.aux_buffer->size());
    c.aux = aux.data();
  }
  Selection sel;
  select(c, host.data(), n, sel);
  upload_selection(ops, sel, out);
  out.threshold = sel.threshold;
  out.partition_ms = sel.partition_ms;
  out.estimate_ms = sel.estimate_ms;
}

void Sparsifier::unpack_on(bulk::Ops& ops, const SelectContext& ctx, int64_t n,
                           const bulk::Buffer& words, int64_t offset, int64_t count,
                           DeviceSelection& out) const {
  check_cpu(ops, *this);
  std::vector<uint32_t> w(static_cast<size_t>(count));
  ops.download(words, offset, count, w.data());
  Selection sel;
  unpack(ctx, n, w.data(), count, sel);
  sel.packed.clear();
  upload_selection(ops, sel, out);
}

void Sparsifier::decode_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& coeffs,
                           int64_t n, bulk::Buffer& out) {
  check_cpu(ops, *this);
  const std::vector<float> c = host_copy(ops, coeffs, 0, coeffs.size());
  std::vector<float> y(static_cast<size_t>(n));
  decode(ctx, c.data(), n, y.data());
  ops.upload(y.data(), bulk::Elem::F32, n, out);
}

void Sparsifier::second_message_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                                   const bulk::Buffer& first_sum, bulk::Buffer& out) {
  check_cpu(ops, *this);
  const std::vector<float> xs = host_copy(ops, x, 0, x.size());
  const std::vector<float> f = host_copy(ops, first_sum, 0, first_sum.size());
  std::vector<float> m;
  second_message(ctx, xs.data(), x.size(), f.data(), m);
  ops.upload(m.data(), bulk::Elem::F32, static_cast<int64_t>(m.size()), out);
}

}  // namespace st
