// Per-rank selection cost of MiCRO and ExDyna: on a buffer the size of
// ResNet-50's gradients (25,557,032 floats) split into P = 4 partitions, rank 0's
// selection over its owned quarter vs one streaming pass (a sum) over the same quarter.
// MiCRO's claim (Yoon & Oh, HiPC 2023) is "near-zero cost": one comparison pass over
// n/P elements. The data are scaled so that tau_0 = 1/(2 sqrt(k)) is the buffer's exact
// k-th magnitude, i.e. the threshold the rule converges to at density d.
// Prints one JSON object; bench/compare_micro_select.py sets it against torch.topk.
//   micro_select_bench [--n N] [--parts P] [--density d] [--reps R] [--threads T]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "core/rng.h"
#include "core/timer.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/exdyna.h"
#include "sparsify/kernels/select_cpu.h"
#include "sparsify/micro.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One streaming pass: the cheapest thing that reads every element once.
float stream_sum(const float* x, int64_t begin, int64_t end) {
  float s = 0.0f;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
  for (int64_t i = begin; i < end; ++i) s += x[i];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 25557032;
  int parts = 4, reps = 20, threads = 1;
  double density = 0.001;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--n")
      n = std::atoll(argv[i + 1]);
    else if (f == "--parts")
      parts = std::atoi(argv[i + 1]);
    else if (f == "--density")
      density = std::atof(argv[i + 1]);
    else if (f == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (f == "--threads")
      threads = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "micro_select_bench: unknown flag %s (flags: --n --parts --density --reps "
                   "--threads)\n",
                   argv[i]);
      return 2;
    }
  }
  st::set_num_threads(threads);
  const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(std::floor(density * n)));

  // Heavy-tailed gradient-like data (normal times |normal|), scaled so that the exact
  // k-th largest magnitude equals tau_0.
  std::vector<float> x(n);
  st::Rng rng(1);
  for (auto& v : x) v = rng.normal() * std::abs(rng.normal());
  std::vector<int32_t> top;
  st::Timer timer;
  const float kth = st::select::topk_abs(x.data(), n, k, top);
  const double own_topk_ms = timer.ms();
  const double scale = st::part::initial_threshold(k) / kth;
  for (auto& v : x) v = static_cast<float>(v * scale);

  // The selections run as the hook runs them: select_on() through the CPU implementation
  // of bulk::Ops, on the buffer wrapped without a copy.
  st::bulk::CpuOps ops;
  st::Tensor xt = st::Tensor::from_vector(x, {n});
  const st::bulk::Buffer xb = ops.wrap(xt);
  st::SelectContext ctx;
  ctx.world = parts;
  ctx.density = density;
  ctx.k = k;
  st::Micro micro{st::part::ThresholdRule{}};
  st::ExDyna exdyna{st::part::ThresholdRule{}, st::part::BlockRule{}};
  st::DeviceSelection sel_m, sel_e;
  micro.select_on(ops, ctx, xb, sel_m);  // warm-up, and creates the bucket state
  exdyna.select_on(ops, ctx, xb, sel_e);
  const st::part::Range own = micro.partition(0, st::part::owned_partition(0, 0, parts));

  std::vector<double> t_micro, t_exdyna, t_sum;
  volatile float sink = 0.0f;
  for (int r = 0; r < reps; ++r) {
    // Alternate the order so neither side always runs on a warmer cache.
    for (int which = 0; which < 3; ++which) {
      const int w = (which + r) % 3;
      timer.reset();
      if (w == 0) {
        micro.select_on(ops, ctx, xb, sel_m);
        t_micro.push_back(timer.ms());
      } else if (w == 1) {
        exdyna.select_on(ops, ctx, xb, sel_e);
        t_exdyna.push_back(timer.ms());
      } else {
        sink = sink + stream_sum(xt.f32(), own.begin, own.end);
        t_sum.push_back(timer.ms());
      }
    }
  }
  const double sel_ms = median(t_micro), sum_ms = median(t_sum);
  std::printf(
      "{\"bench\":\"micro_select\",\"impl\":\"sparsetrain\",\"n\":%lld,\"parts\":%d,"
      "\"density\":%g,\"k\":%lld,\"threads\":%d,\"reps\":%d,\"owned\":%lld,\"tau\":%.6g,"
      "\"selected_micro\":%lld,\"selected_exdyna\":%lld,\"micro_select_ms\":%.3f,"
      "\"exdyna_select_ms\":%.3f,\"stream_sum_ms\":%.3f,\"select_over_sum\":%.3f,"
      "\"own_topk_whole_ms\":%.1f}\n",
      static_cast<long long>(n), parts, density, static_cast<long long>(k), threads, reps,
      static_cast<long long>(own.size()), micro.threshold(0),
      static_cast<long long>(sel_m.indices.size()), static_cast<long long>(sel_e.indices.size()),
      sel_ms, median(t_exdyna), sum_ms, sel_ms / sum_ms, own_topk_ms);
  return 0;
}
