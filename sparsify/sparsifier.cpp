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

// Adapters for methods that are not device-ready yet: the host forms on the buffers'
// memory in place where the implementation keeps it on the host (Ops::host_memory, the
// CPU implementation), otherwise on host copies made through ops (download / upload), so
// they stay correct under any implementation. CPU buckets only.
namespace {

// Host copies and host-form results, kept per thread so a bucket's worth is not
// reallocated every call.
struct HostScratch {
  std::vector<float> x, grad, aux, first, out;
  std::vector<uint32_t> words;
  Selection sel;
};
HostScratch& scratch() {
  thread_local HostScratch s;
  return s;
}

// n elements of b from `begin` as host memory: in place, or copied into `copy`.
template <typename T>
const T* host_view(bulk::Ops& ops, const bulk::Buffer& b, int64_t begin, int64_t n,
                   std::vector<T>& copy) {
  if (const void* p = ops.host_memory(b)) return static_cast<const T*>(p) + begin;
  if (static_cast<int64_t>(copy.size()) < n) copy.resize(static_cast<size_t>(n));
  ops.download(b, begin, n, copy.data());
  return copy.data();
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

// n floats written by a host form into `out`: in place, or through an upload.
template <typename Fn>
void write_host(bulk::Ops& ops, int64_t n, bulk::Buffer& out, Fn&& fill) {
  ops.resize(out, bulk::Elem::F32, n);
  if (void* p = ops.host_memory(out)) {
    fill(static_cast<float*>(p));
    return;
  }
  std::vector<float>& y = scratch().out;
  if (static_cast<int64_t>(y.size()) < n) y.resize(static_cast<size_t>(n));
  fill(y.data());
  ops.upload(y.data(), bulk::Elem::F32, n, out);
}

}  // namespace

void Sparsifier::select(const SelectContext&, const float*, int64_t, Selection&) {
  ST_THROW("--sparsifier ", name(),
           " has no host form of select(); it selects through select_on()");
}

void Sparsifier::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                           DeviceSelection& out) {
  check_cpu(ops, *this);
  HostScratch& h = scratch();
  const int64_t n = x.size();
  SelectContext c = ctx;
  if (ctx.grad_buffer) c.grad = host_view(ops, *ctx.grad_buffer, 0, n, h.grad);
  if (ctx.aux_buffer) c.aux = host_view(ops, *ctx.aux_buffer, 0, n, h.aux);
  Selection& sel = h.sel;
  sel.clear();
  select(c, host_view(ops, x, 0, n, h.x), n, sel);
  upload_selection(ops, sel, out);
  out.threshold = sel.threshold;
  out.partition_ms = sel.partition_ms;
  out.estimate_ms = sel.estimate_ms;
}

void Sparsifier::unpack_on(bulk::Ops& ops, const SelectContext& ctx, int64_t n,
                           const bulk::Buffer& words, int64_t offset, int64_t count,
                           DeviceSelection& out) const {
  check_cpu(ops, *this);
  HostScratch& h = scratch();
  Selection& sel = h.sel;
  sel.clear();
  unpack(ctx, n, host_view(ops, words, offset, count, h.words), count, sel);
  sel.packed.clear();
  upload_selection(ops, sel, out);
}

void Sparsifier::decode_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& coeffs,
                           int64_t n, bulk::Buffer& out) {
  check_cpu(ops, *this);
  std::vector<float> copy;
  const float* c = host_view(ops, coeffs, 0, coeffs.size(), copy);
  write_host(ops, n, out, [&](float* y) { decode(ctx, c, n, y); });
}

void Sparsifier::second_message_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                                   const bulk::Buffer& first_sum, bulk::Buffer& out) {
  check_cpu(ops, *this);
  HostScratch& h = scratch();
  std::vector<float> m;
  second_message(ctx, host_view(ops, x, 0, x.size(), h.x), x.size(),
                 host_view(ops, first_sum, 0, first_sum.size(), h.first), m);
  ops.upload(m.data(), bulk::Elem::F32, static_cast<int64_t>(m.size()), out);
}

}  // namespace st
