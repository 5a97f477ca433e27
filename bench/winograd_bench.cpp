// oneDNN's Winograd F(4x4, 3x3) against its direct method on 3x3 stride-1 convolutions:
// forward, backward data and backward weights of each shape (the ImageNet ResNets' four
// stages at batch 16, the CIFAR ResNets' three at batch 128), best of three after one
// warm-up, fp32. One JSON line a shape with both times and their ratio;
// core/kernels/conv_onednn.cpp's rule for choosing Winograd comes from these figures.
//
//   winograd_bench [--threads 2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "core/parallel.h"

namespace {

using dnnl::memory;
using tag = memory::format_tag;

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct Times {
  double fwd = 1e30, bwd_data = 1e30, bwd_weights = 1e30;
  double total() const { return fwd + bwd_data + bwd_weights; }
};

// Best of three of each pass of an N x C x H x H -> N x C x H x H convolution.
Times time_conv(dnnl::algorithm alg, int64_t n, int64_t c, int64_t h) {
  const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const memory::dims x{n, c, h, h}, w{c, c, 3, 3}, one{1, 1};
  const auto f32 = memory::data_type::f32;
  const memory::desc xa(x, f32, tag::any), wa(w, f32, tag::any);
  using namespace dnnl;
  const convolution_forward::primitive_desc fwd(
      convolution_forward::desc(prop_kind::forward_training, alg, xa, wa, xa, one, one, one), eng);
  const convolution_backward_data::primitive_desc bd(
      convolution_backward_data::desc(alg, xa, wa, xa, one, one, one), eng, fwd);
  const convolution_backward_weights::primitive_desc bw(
      convolution_backward_weights::desc(alg, xa, wa, xa, one, one, one), eng, fwd);
  memory src(fwd.src_desc(), eng), wei(fwd.weights_desc(), eng), dst(fwd.dst_desc(), eng);
  memory dsrc(bd.diff_src_desc(), eng), ddst(bd.diff_dst_desc(), eng),
      wei_d(bd.weights_desc(), eng);
  memory src_w(bw.src_desc(), eng), ddst_w(bw.diff_dst_desc(), eng),
      dwei(bw.diff_weights_desc(), eng);
  const convolution_forward f(fwd);
  const convolution_backward_data d(bd);
  const convolution_backward_weights g(bw);
  Times t;
  for (int r = 0; r < 4; ++r) {
    const double t0 = now_ms();
    f.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    s.wait();
    const double t1 = now_ms();
    d.execute(s, {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, wei_d}, {DNNL_ARG_DIFF_SRC, dsrc}});
    s.wait();
    const double t2 = now_ms();
    g.execute(s,
              {{DNNL_ARG_SRC, src_w}, {DNNL_ARG_DIFF_DST, ddst_w}, {DNNL_ARG_DIFF_WEIGHTS, dwei}});
    s.wait();
    const double t3 = now_ms();
    if (r == 0) continue;  // warm-up
    t.fwd = std::min(t.fwd, t1 - t0);
    t.bwd_data = std::min(t.bwd_data, t2 - t1);
    t.bwd_weights = std::min(t.bwd_weights, t3 - t2);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--threads") {
      threads = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "winograd_bench: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  st::set_num_threads(threads);
  const int64_t shapes[][3] = {{16, 64, 56},  {16, 128, 28}, {16, 256, 14}, {16, 512, 7},
                               {128, 16, 32}, {128, 32, 16}, {128, 64, 8}};
  for (const auto& sh : shapes) {
    const Times d = time_conv(dnnl::algorithm::convolution_direct, sh[0], sh[1], sh[2]);
    const Times w = time_conv(dnnl::algorithm::convolution_winograd, sh[0], sh[1], sh[2]);
    std::printf(
        "{\"bench\":\"winograd\",\"batch\":%lld,\"channels\":%lld,\"side\":%lld,\"threads\":%d,"
        "\"direct_ms\":[%.3f,%.3f,%.3f],\"winograd_ms\":[%.3f,%.3f,%.3f],"
        "\"winograd_over_direct\":%.3f}\n",
        static_cast<long long>(sh[0]), static_cast<long long>(sh[1]), static_cast<long long>(sh[2]),
        threads, d.fwd, d.bwd_data, d.bwd_weights, w.fwd, w.bwd_data, w.bwd_weights,
        w.total() / d.total());
  }
  return 0;
}
