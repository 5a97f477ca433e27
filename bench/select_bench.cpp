// Selection benchmark: on a ResNet-50-sized buffer (25,557,032 floats) of
// heavy-tailed values (normal x |normal|, fixed seed), per density d:
//   topk       select::topk_abs, exact Top-k of |x|, k = floor(d n)
//   threshold  select::abs_threshold at the k-th largest |x| (what a threshold method
//              such as MiCRO or hard-threshold costs when its threshold gives ~k)
//   stream     one plain streaming pass over the buffer (a sum), the memory-bound floor
// Prints one JSON line per (density, op) with the median over --reps runs. The threshold
// and stream runs alternate rep by rep, and the threshold line also carries the median of
// the per-rep threshold/stream ratios: on a shared machine the load changes from second
// to second, and a ratio of neighbouring runs sees the same load.
//
//   select_bench [--n 25557032] [--reps 11] [--threads 2] [--seed 1]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "sparsify/kernels/select_cpu.h"

namespace {

// x_i = z1 * |z2| from Box-Muller on one Philox block per element: heavy tails
// (kurtosis 9 vs 3 for a normal), the same values on any thread count.
void fill_heavy_tailed(std::vector<float>& x, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(x.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const st::Philox4 w = st::philox_block(seed, 1, static_cast<uint64_t>(i));
    const float u1 = std::max(st::uint_to_unit(w.v[0]), 1e-7f), u2 = st::uint_to_unit(w.v[1]);
    const float u3 = std::max(st::uint_to_unit(w.v[2]), 1e-7f), u4 = st::uint_to_unit(w.v[3]);
    const float z1 = std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
    const float z2 = std::sqrt(-2.0f * std::log(u3)) * std::cos(6.2831853f * u4);
    x[i] = z1 * std::abs(z2);
  }
}

// One streaming pass: the sum of the buffer (vectorised, all threads).
float stream_sum(const float* x, int64_t n) {
  float s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

double time_ms(const std::function<void()>& fn) {
  const auto a = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
}

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double median_ms(int reps, const std::function<void()>& fn) {
  fn();  // warm-up: page faults, first-touch of scratch buffers
  std::vector<double> t(reps);
  for (int r = 0; r < reps; ++r) t[r] = time_ms(fn);
  return median(t);
}

// Medians of a and b run alternately, and the median of the per-rep ratios a/b.
struct Paired {
  double a_ms, b_ms, ratio;
};
Paired paired_ms(int reps, const std::function<void()>& a, const std::function<void()>& b) {
  a();
  b();
  std::vector<double> ta(reps), tb(reps), q(reps);
  for (int r = 0; r < reps; ++r) {
    ta[r] = time_ms(a);
    tb[r] = time_ms(b);
    q[r] = ta[r] / tb[r];
  }
  return {median(ta), median(tb), median(q)};
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 25557032;
  int reps = 11, threads = 2;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--n") {
      n = std::atoll(argv[i + 1]);
    } else if (a == "--reps") {
      reps = std::atoi(argv[i + 1]);
    } else if (a == "--threads") {
      threads = std::atoi(argv[i + 1]);
    } else if (a == "--seed") {
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "select_bench: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (n <= 0 || reps <= 0 || threads <= 0) {
    std::fprintf(stderr, "select_bench: --n, --reps and --threads must be positive\n");
    return 2;
  }
  omp_set_num_threads(threads);
  std::vector<float> x(n);
  fill_heavy_tailed(x, seed);
  volatile float sink = 0;
  const auto stream_pass = [&] { sink = sink + stream_sum(x.data(), n); };
  std::vector<int32_t> out;
  for (double d : {0.01, 0.001}) {
    const int64_t k = static_cast<int64_t>(std::floor(d * static_cast<double>(n)));
    float tau = 0;
    const double topk = median_ms(reps, [&] { tau = st::select::topk_abs(x.data(), n, k, out); });
    const Paired p = paired_ms(
        reps, [&] { st::select::abs_threshold(x.data(), 0, n, tau, /*strict=*/false, out); },
        stream_pass);
    const int64_t selected = static_cast<int64_t>(out.size());
    const char* fmt =
        "{\"bench\": \"select\", \"impl\": \"sparsetrain\", \"n\": %lld, \"density\": %g, "
        "\"k\": %lld, \"op\": \"%s\", \"median_ms\": %.3f, \"selected\": %lld, \"threads\": "
        "%d, \"reps\": %d";
    std::printf(fmt, static_cast<long long>(n), d, static_cast<long long>(k), "topk", topk,
                static_cast<long long>(k), threads, reps);
    std::printf("}\n");
    std::printf(fmt, static_cast<long long>(n), d, static_cast<long long>(k), "threshold", p.a_ms,
                static_cast<long long>(selected), threads, reps);
    std::printf(", \"vs_stream\": %.3f}\n", p.ratio);
    std::printf(fmt, static_cast<long long>(n), d, static_cast<long long>(k), "stream", p.b_ms,
                static_cast<long long>(0), threads, reps);
    std::printf("}\n");
  }
  return 0;
}
