// Selection cost of SIDCo (Abdelmoniem et al., MLSys 2021) and of the FFT sparsifier
// (Wang et al., HPDC 2020) on one ResNet-50-sized buffer (25,557,032 floats), against one
// streaming pass over it and against exact Top-k (select::topk_abs). One JSON object per
// line; times are medians over --reps runs after one warm-up.
//   sidco_bench [--reps R] [--threads T] [--n N] [--density D] [--fft-reps R (0: no FFT)]
// The buffer is gradient-like: normal * |normal| * 0.01 (heavy tails), Philox-seeded.
// FFT layouts: "bucket" (one transform of all n; 25,557,032 = 8 x 3,194,629, a large prime
// factor), "block65536" (pieces of 2^16), "resnet50" (per tensor: ResNet-50's parameter
// sizes in the flat layout's reverse order; only when n is 25,557,032).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "core/rng.h"
#include "core/timer.h"
#include "models/registry.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/fft.h"
#include "sparsify/kernels/select_cpu.h"
#include "sparsify/sidco_fit.h"

namespace {

double median_ms(int reps, const std::function<void()>& fn) {
  fn();  // warm-up (page faults, plans, allocations)
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    st::Timer timer;
    fn();
    t.push_back(timer.ms());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// One streaming pass: sum |x| in double (what SIDCo's first stage has to read anyway).
double stream_pass(const float* x, int64_t n) {
  double s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
  for (int64_t i = 0; i < n; ++i) s += std::abs(x[i]);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 11, fft_reps = 3, threads = 2;
  int64_t n = 25'557'032;
  double density = 0.001;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--fft-reps"))
      fft_reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--n"))
      n = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--density"))
      density = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "sidco_bench: unknown flag %s (flags: --reps --fft-reps --threads --n "
                   "--density)\n",
                   argv[i]);
      return 2;
    }
  }
  st::set_num_threads(threads);
  std::vector<float> x(n);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < n; b += 4096) {
    st::Rng rng(1234 + static_cast<uint64_t>(b / 4096));
    for (int64_t i = b; i < std::min(n, b + 4096); ++i)
      x[i] = rng.normal() * std::abs(rng.normal()) * 0.01f;
  }
  const int64_t k = static_cast<int64_t>(density * static_cast<double>(n));
  volatile double sink = 0;
  const double pass_ms = median_ms(reps, [&] { sink = sink + stream_pass(x.data(), n); });
  std::printf("{\"bench\":\"stream_pass\",\"n\":%lld,\"threads\":%d,\"ms\":%.3f,\"GBps\":%.2f}\n",
              static_cast<long long>(n), threads, pass_ms, 4.0 * n / pass_ms / 1e6);
  std::vector<int32_t> out;
  const double topk_ms =
      median_ms(reps, [&] { st::select::topk_abs(x.data(), n, std::max<int64_t>(k, 1), out); });
  std::printf(
      "{\"bench\":\"topk_abs\",\"n\":%lld,\"density\":%g,\"ms\":%.3f,\"x_stream_pass\":%.2f}\n",
      static_cast<long long>(n), density, topk_ms, topk_ms / pass_ms);
  std::fflush(stdout);

  // SIDCo: estimate + strict selection through the CPU implementation of bulk::Ops on the
  // buffer wrapped without a copy, each variant and stage count (5 stages compact the
  // exceedances for the later passes).
  st::bulk::CpuOps ops;
  st::Tensor xt = st::Tensor::from_vector(x, {n});
  const st::bulk::Buffer xb = ops.wrap(xt);
  st::bulk::Buffer selected;
  for (auto v : {st::sidco::Variant::E, st::sidco::Variant::P, st::sidco::Variant::GP})
    for (int m : {1, 2, 3, 5}) {
      st::sidco::Workspace ws;
      st::sidco::Estimate e;
      const double ms = median_ms(reps, [&] {
        e = st::sidco::estimate(ops, xb, v, m, density, ws);
        st::sidco::select_above(ops, xb, e, ws, selected);
      });
      std::printf(
          "{\"bench\":\"sidco\",\"variant\":\"%s\",\"stages\":%d,\"n\":%lld,\"density\":%g,"
          "\"ms\":%.3f,\"x_stream_pass\":%.2f,\"x_topk\":%.3f,\"achieved_over_target\":%.3f}\n",
          st::sidco::variant_name(v), m, static_cast<long long>(n), density, ms, ms / pass_ms,
          ms / topk_ms, static_cast<double>(selected.size()) / std::max<int64_t>(k, 1));
      std::fflush(stdout);
    }
  if (fft_reps <= 0) return 0;  // --fft-reps 0: SIDCo only

  // FFT sparsifier: select (R2C, magnitudes, top fraction, range-float quantise, pack) and
  // decode (C2R / N), at the same kept fraction (1 - theta = density).
  std::vector<std::pair<std::string, std::vector<int64_t>>> layouts = {{"bucket", {}},
                                                                       {"block65536", {}}};
  if (n == 25'557'032) {
    st::Rng rng(0);
    st::LayerPtr model = st::make_model("resnet50", 1000, 3, rng);
    std::vector<int64_t> sizes;
    model->visit_params(
        "", [&](const std::string&, st::Param& p) { sizes.push_back(p.value.numel()); });
    std::reverse(sizes.begin(), sizes.end());  // FlatParams: reverse registration order
    std::vector<int64_t> starts;
    int64_t off = 0;
    for (int64_t s : sizes) {
      starts.push_back(off);
      off += s;
    }
    if (off == n) layouts.push_back({"resnet50", starts});
  }
  for (const auto& [name, segments] : layouts) {
    for (int bits : {8, 16}) {
      st::SparsifierOptions o;
      o.density = density;
      o.params = {{"bits", std::to_string(bits)}, {"block", name == "block65536" ? "65536" : "0"}};
      st::FftSparsifier fft(o);
      st::SelectContext ctx;
      ctx.density = density;
      ctx.segments = segments;
      // Through the CPU implementation of bulk::Ops, x wrapped without a copy.
      st::bulk::CpuOps fops;
      st::Tensor xf = st::Tensor::from_vector(x, {n});
      const st::bulk::Buffer xfb = fops.wrap(xf);
      st::DeviceSelection dsel;
      const double sel_ms = median_ms(fft_reps, [&] { fft.select_on(fops, ctx, xfb, dsel); });
      st::Selection sel;
      sel.indices.resize(static_cast<size_t>(dsel.indices.size()));
      sel.values.resize(static_cast<size_t>(dsel.values.size()));
      sel.packed.resize(static_cast<size_t>(dsel.packed.size()));
      fops.download(dsel.indices, 0, dsel.indices.size(), sel.indices.data());
      fops.download(dsel.values, 0, dsel.values.size(), sel.values.data());
      const int64_t dn = fft.domain_size(ctx, n);
      std::vector<float> coef(dn, 0.0f), y(n);
      for (size_t j = 0; j < sel.indices.size(); ++j) coef[sel.indices[j]] = sel.values[j];
      st::bulk::Buffer cb, yb;
      fops.upload(coef.data(), st::bulk::Elem::F32, dn, cb);
      const double dec_ms = median_ms(fft_reps, [&] { fft.decode_on(fops, ctx, cb, n, yb); });
      fops.download(yb, 0, n, y.data());
      double err = 0, ref = 0;
      for (int64_t i = 0; i < n; ++i) {
        err += static_cast<double>(y[i] - x[i]) * (y[i] - x[i]);
        ref += static_cast<double>(x[i]) * x[i];
      }
      std::printf(
          "{\"bench\":\"fft\",\"layout\":\"%s\",\"bits\":%d,\"n\":%lld,\"keep\":%g,"
          "\"select_ms\":%.1f,\"decode_ms\":%.1f,\"Melem_per_s\":%.1f,\"x_topk\":%.1f,"
          "\"bytes\":%lld,\"rel_error\":%.4f}\n",
          name.c_str(), bits, static_cast<long long>(n), density, sel_ms, dec_ms,
          n / (sel_ms + dec_ms) / 1e3, (sel_ms + dec_ms) / topk_ms,
          static_cast<long long>(4 * sel.packed.size()), std::sqrt(err / ref));
      std::fflush(stdout);
    }
  }
  return sink > 0 ? 0 : 0;
}
