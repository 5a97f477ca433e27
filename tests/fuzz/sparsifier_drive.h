// What the sparsify hook does with one bucket on one rank, for the fuzz targets and their
// seed writer: select, check every position lies in the bucket (or the method's coefficient
// domain), and feed the count back.
#pragma once

#include <cstdint>
#include <vector>

#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/sparsifier.h"

namespace st::fuzz {

// `ctx` carries the bucket, iteration, density, k and segments; grad and aux are set here
// (aux: `aux_value` everywhere). Selects through select_on() on the CPU implementation of
// bulk::Ops, as the hook does. Traps on a position outside the bucket.
inline void select_and_observe(Sparsifier& s, const std::vector<float>& x, float aux_value,
                               SelectContext ctx) {
  const int64_t n = static_cast<int64_t>(x.size());
  const std::vector<float> aux(x.size(), aux_value);
  bulk::CpuOps ops;
  bulk::Buffer xb, gb, ab;
  ops.upload(x.data(), bulk::Elem::F32, n, xb);
  ops.upload(x.data(), bulk::Elem::F32, n, gb);
  ops.upload(aux.data(), bulk::Elem::F32, n, ab);
  ctx.grad_buffer = &gb;
  ctx.aux_buffer = &ab;
  DeviceSelection sel;
  s.select_on(ops, ctx, xb, sel);
  std::vector<int32_t> indices(static_cast<size_t>(sel.indices.size()));
  ops.download(sel.indices, 0, sel.indices.size(), indices.data());
  const int64_t domain = s.transform_domain() ? s.domain_size(ctx, n) : n;
  for (int32_t i : indices)
    if (i < 0 || i >= domain) __builtin_trap();  // a position outside the bucket
  ExchangeFeedback fb;
  fb.bucket = ctx.bucket;
  fb.iteration = ctx.iteration;
  fb.n = n;
  fb.k = ctx.k;
  fb.global_count = static_cast<int64_t>(indices.size());
  fb.rank_counts = {fb.global_count};
  s.observe(fb);
}

}  // namespace st::fuzz
