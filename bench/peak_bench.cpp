// The machine's physical limits, measured: the fp32 FMA peak (independent FMA chains on
// every thread, enough of them to cover the FMA latency times the number of FMA pipes,
// so throughput and not latency bounds the loop) and the memory bandwidth of a streaming
// read and of a copy over buffers far larger than the last-level cache. One JSON line
// each; bench/compare_train_step.py divides a step's achieved GFLOP/s by the peak.
//
//   peak_bench [--threads 2] [--reps 7] [--mb 512]
#include <omp.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

double seconds_since(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

// Best of `reps` timings of fn(): the peak is what the hardware can do when nobody else
// is running, so the fastest run is the estimate (the median is printed beside it).
template <class F>
void time_reps(int reps, F fn, double& best, double& median) {
  std::vector<double> t;
  fn();  // warm-up: page faults, frequency ramp
  for (int r = 0; r < reps; ++r) {
    const auto a = std::chrono::steady_clock::now();
    fn();
    t.push_back(seconds_since(a));
  }
  std::sort(t.begin(), t.end());
  best = t.front();
  median = t[t.size() / 2];
}

// 12 independent accumulators: FMA latency 4 cycles x 2 pipes = 8 chains in flight cover
// Zen 4 and Intel server cores; 12 leaves headroom without spilling registers.
constexpr int kChains = 12;

// The widest fp32 vector this build targets, with its fused multiply-add.
#if defined(__AVX512F__)
using Vec = __m512;
inline Vec splat(float v) {
  return _mm512_set1_ps(v);
}
inline Vec fmadd(Vec a, Vec b, Vec c) {
  return _mm512_fmadd_ps(a, b, c);
}
const char* isa() {
  return "avx512";
}
#else
// GCC vector types: a * b + c becomes one FMA instruction where the target has one (the
// build's -std=gnu++20 contracts it); without one the peak counts a multiply and an add.
#if defined(__AVX__)
using Vec __attribute__((vector_size(32))) = float;
#else
using Vec __attribute__((vector_size(16))) = float;  // SSE width: the x86-64 baseline
#endif
inline Vec splat(float v) {
  return Vec{} + v;
}
inline Vec fmadd(Vec a, Vec b, Vec c) {
  return a * b + c;
}
const char* isa() {
  return "generic";
}
#endif
constexpr int kLanes = sizeof(Vec) / sizeof(float);

// Runs `iters` rounds of kChains FMAs per thread; returns a value so the work is kept.
float fma_chains(int64_t iters) {
  Vec acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = splat(0.001f * static_cast<float>(c));
  const Vec a = splat(0.999999f), b = splat(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = fmadd(acc[c], a, b);
  float lanes[kChains][kLanes];
  std::memcpy(lanes, acc, sizeof(acc));
  float t = 0;
  for (const auto& chain : lanes)
    for (const float e : chain) t += e;
  return t;
}

// One streaming read: the sum of x (vectorised, `threads` threads).
float stream_sum(const float* x, int64_t n, int threads) {
  float s = 0;
#pragma omp parallel for simd num_threads(threads) reduction(+ : s) schedule(static)
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 7;
  int64_t mb = 512;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (f == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (f == "--mb")
      mb = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "peak_bench: unknown flag %s (--threads --reps --mb)\n", argv[i]);
      return 2;
    }
  }
  if (threads <= 0 || reps <= 0 || mb <= 0) {
    std::fprintf(stderr, "peak_bench: --threads, --reps and --mb must be positive\n");
    return 2;
  }
  volatile float sink = 0;
  // FMA peak on 1 thread and on `threads` threads (each thread runs its own chains).
  const int64_t iters = 20'000'000;
  std::vector<int> counts = {1};
  if (threads > 1) counts.push_back(threads);
  for (const int t : counts) {
    double best = 0, med = 0;
    time_reps(
        reps,
        [&] {
          float s = 0;
#pragma omp parallel num_threads(t) reduction(+ : s)
          s += fma_chains(iters);
          sink = sink + s;
        },
        best, med);
    // One FMA is 2 flops per lane.
    const double flops = 2.0 * kLanes * kChains * static_cast<double>(iters) * t;
    std::printf(
        "{\"bench\":\"peak\",\"op\":\"fma_fp32\",\"isa\":\"%s\",\"threads\":%d,\"gflops\":%.1f,"
        "\"median_gflops\":%.1f}\n",
        isa(), t, flops / best * 1e-9, flops / med * 1e-9);
  }
  // Memory bandwidth over two buffers of `mb` MiB each.
  const int64_t n = mb * (1 << 20) / 4;
  std::vector<float> a(n), b(n);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) a[i] = static_cast<float>(i & 1023), b[i] = 0;
  const double bytes = static_cast<double>(n) * 4;
  double best = 0, med = 0;
  time_reps(
      reps, [&] { sink = sink + stream_sum(a.data(), n, threads); }, best, med);
  std::printf(
      "{\"bench\":\"peak\",\"op\":\"stream_read\",\"threads\":%d,\"mb\":%lld,\"gbps\":%.1f,"
      "\"median_gbps\":%.1f,\"ms\":%.2f}\n",
      threads, static_cast<long long>(mb), bytes / best * 1e-9, bytes / med * 1e-9, best * 1e3);
  time_reps(
      reps,
      [&] {
#pragma omp parallel num_threads(threads)
        {
          const int r = omp_get_thread_num(), used = omp_get_num_threads();
          const int64_t lo = n * r / used, hi = n * (r + 1) / used;
          std::memcpy(b.data() + lo, a.data() + lo, static_cast<size_t>(hi - lo) * 4);
        }
      },
      best, med);
  // Copy moves the bytes twice (read a, write b); reported as read + written bytes.
  std::printf(
      "{\"bench\":\"peak\",\"op\":\"copy\",\"threads\":%d,\"mb\":%lld,\"gbps\":%.1f,"
      "\"median_gbps\":%.1f,\"ms\":%.2f}\n",
      threads, static_cast<long long>(mb), 2 * bytes / best * 1e-9, 2 * bytes / med * 1e-9,
      best * 1e3);
  return sink == 12345.0f ? 1 : 0;
}
