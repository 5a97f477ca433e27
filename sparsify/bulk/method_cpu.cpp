// CpuOps: the method-specific passes (DGC's momentum correction, VGC's variance test and
// its wire words; op_list.h, ST_BULK_METHOD_OPS). The loops are the ones those methods ran
// on host memory before the interface, in the same order, so results keep their bits.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cpu_common.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/quant_math.h"

namespace st::bulk {

using cpu_detail::bits_float;
using cpu_detail::float_bits;
using cpu_detail::kParallelMin;
// VGC's test and the TernGrad / EF-signSGD sums run over fixed blocks, joined in order.
constexpr int64_t kBlock = cpu_detail::kSumBlock;

// --- DGC ---

void CpuOps::dgc_momentum(float m, const Buffer& x, Buffer& u, Buffer& v, Buffer& seen) {
  const int64_t n = x.size();
  check::dgc_state(n, u, v, seen);
  const float* xp = f32(x);
  float* up = f32(u);
  float* acc = f32(v);
  float* sp = f32(seen);
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    up[i] = m * up[i] + (xp[i] - sp[i]);
    acc[i] += up[i];
    sp[i] = xp[i];
  }
}

// --- VGC ---

float CpuOps::vgc_test(const Buffer& x, const Buffer* aux, const Buffer* grad, float inv_batch,
                       float alpha, float zeta, float tau, Buffer& v, Buffer& out) {
  const int64_t n = x.size();
  check::vgc_inputs(n, v, aux || grad);
  const float* xp = f32(x);
  const float* ap = aux ? f32(*aux) : nullptr;
  const float* gp = grad ? f32(*grad) : nullptr;
  float* vp = f32(v);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  range_hits_.resize(static_cast<size_t>(blocks));
  range_cut_.assign(static_cast<size_t>(blocks), 0.0f);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    std::vector<int32_t>& hits = range_hits_[static_cast<size_t>(b)];
    hits.clear();
    const int64_t end = std::min(n, (b + 1) * kBlock);
    float mx = 0.0f;
    for (int64_t i = b * kBlock; i < end; ++i) {
      const float add = ap ? ap[i] : gp[i] * gp[i] * inv_batch;
      const float vi = vp[i] + add;
      const float r = xp[i];
      const bool send = r * r > alpha * vi || (tau > 0 && std::abs(r) > tau);
      if (send) {
        hits.push_back(static_cast<int32_t>(i));
        mx = std::max(mx, std::abs(r));
        vp[i] = 0.0f;
      } else {
        vp[i] = vi * zeta;
      }
    }
    range_cut_[static_cast<size_t>(b)] = mx;
  }
  int64_t total = 0;
  for (int64_t b = 0; b < blocks; ++b) total += static_cast<int64_t>(range_hits_[b].size());
  resize(out, Elem::I32, total);
  int32_t* o = i32(out);
  for (int64_t b = 0; b < blocks; ++b) {
    const std::vector<int32_t>& h = range_hits_[static_cast<size_t>(b)];
    std::copy(h.begin(), h.end(), o);
    o += h.size();
  }
  float scale = 0.0f;
  for (float c : range_cut_) scale = std::max(scale, c);
  return scale;
}

void CpuOps::vgc_pack(const Buffer& x, const Buffer& idx, float scale, int index_bits,
                      Buffer& packed, Buffer& values) {
  const int64_t m = idx.size();
  resize(packed, Elem::U32, m + 1);
  resize(values, Elem::F32, m);
  const float* xp = f32(x);
  const int32_t* ip = i32(idx);
  auto* w = static_cast<uint32_t*>(memory(packed));
  float* vp = f32(values);
  w[0] = float_bits(scale);
#pragma omp parallel for schedule(static) if (m > kParallelMin)
  for (int64_t j = 0; j < m; ++j) {
    const uint32_t word = quant::vgc_encode(ip[j], xp[ip[j]], scale, index_bits);
    w[j + 1] = word;
    vp[j] = quant::vgc_value(word, scale, index_bits);
  }
}

void CpuOps::vgc_unpack(const Buffer& words, int64_t offset, int64_t count, int index_bits,
                        Buffer& idx, Buffer& values) {
  check::vgc_words(words, offset, count);
  const auto* w = static_cast<const uint32_t*>(memory(words)) + offset;
  const float scale = bits_float(w[0]);
  const int64_t m = count - 1;
  resize(idx, Elem::I32, m);
  resize(values, Elem::F32, m);
  int32_t* ip = i32(idx);
  float* vp = f32(values);
#pragma omp parallel for schedule(static) if (m > kParallelMin)
  for (int64_t j = 0; j < m; ++j) {
    ip[j] = quant::vgc_index(w[j + 1], index_bits);
    vp[j] = quant::vgc_value(w[j + 1], scale, index_bits);
  }
}

}  // namespace st::bulk
