#include "core/kernels/conv_onednn_sliced_wgrad.h"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "core/error.h"
#include "core/kernels/conv_onednn_parts.h"
#include "core/tensor.h"

namespace st::cpu {

namespace {
using onednn::memory;
using onednn::tag;
}  // namespace

// One thread's primitive and buffers for a slice of `n` images, built by that thread the
// first time it runs (with its OpenMP thread count set to 1, so oneDNN plans the
// primitive and its reorders for one thread and never forks or waits inside them).
struct SlicedWeightGrad::Worker {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::convolution_backward_weights prim;
  onednn::Staged src, ddst, dw;  // x and dy in, dw out (staged as OneDnnConv's operands)
  memory db;
  std::vector<float> dw_oihw, dbias;

  Worker(int64_t images, int64_t cout, const ConvGeometry& g, bool bias, ConvDTypes io) {
    const onednn::ConvDims d = onednn::conv_dims(images, cout, g);
    constexpr auto bf16 = memory::data_type::bf16, f32 = memory::data_type::f32;
    const memory::desc bias_md(d.bias, f32, tag::x);
    const onednn::ConvPds pds = onednn::make_pds(
        dnnl::algorithm::convolution_direct, eng, memory::desc(d.src, bf16, tag::any),
        memory::desc(d.wei, bf16, tag::any), memory::desc(d.dst, f32, tag::any),
        memory::desc(d.src, f32, tag::any), memory::desc(d.wei, f32, tag::any),
        memory::desc(d.dst, bf16, tag::any), bias ? &bias_md : nullptr, d);
    prim = dnnl::convolution_backward_weights(pds.bwd_weights);
    src.bind(memory::desc(d.src, io.x_bf16 ? bf16 : f32, tag::nchw), pds.bwd_weights.src_desc(),
             eng, true);
    ddst.bind(memory::desc(d.dst, io.y_bf16 ? bf16 : f32, tag::nchw),
              pds.bwd_weights.diff_dst_desc(), eng, true);
    dw.bind(memory::desc(d.wei, f32, tag::oihw), pds.bwd_weights.diff_weights_desc(), eng, false);
    dw_oihw.assign(static_cast<size_t>(cout * g.c * g.kh * g.kw), 0.0f);
    if (bias) {
      dbias.assign(static_cast<size_t>(cout), 0.0f);
      db = memory(bias_md, eng, dbias.data());
    }
  }

  void run(const void* x, const void* dy, const ConvLayouts& layouts) {
    src.set(x, layouts.x);
    src.in(strm);
    ddst.set(dy, layouts.y);
    ddst.in(strm);
    dw.set(dw_oihw.data());
    dw.acquire();
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src.internal},
                                         {DNNL_ARG_DIFF_DST, ddst.internal},
                                         {DNNL_ARG_DIFF_WEIGHTS, dw.internal}};
    if (db) args[DNNL_ARG_DIFF_BIAS] = db;
    prim.execute(strm, args);
    dw.out(strm);
    strm.wait();
    src.release();
    ddst.release();
    dw.release();
  }
};

SlicedWeightGrad::SlicedWeightGrad(int64_t batch, int64_t out_channels, const ConvGeometry& g,
                                   bool bias, ConvDTypes io)
    : batch_(batch), out_channels_(out_channels), g_(g), bias_(bias), io_(io) {}

SlicedWeightGrad::~SlicedWeightGrad() = default;

void SlicedWeightGrad::run(const void* x, const void* dy, float* dw, float* db,
                           const ConvLayouts& layouts, int threads) {
  const int parts = static_cast<int>(std::min<int64_t>(std::max(threads, 1), batch_));
  if (static_cast<int>(workers_.size()) != parts) {
    workers_.clear();
    workers_.resize(static_cast<size_t>(parts));
  }
  // Bytes per image of x and dy.
  const int64_t x_image = g_.c * g_.h * g_.w * (io_.x_bf16 ? 2 : 4),
                y_image = out_channels_ * g_.oh * g_.ow * (io_.y_bf16 ? 2 : 4);
  const auto* xb = static_cast<const char*>(x);
  const auto* dyb = static_cast<const char*>(dy);
  std::vector<std::string> errors(static_cast<size_t>(parts));
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int t = 0; t < parts; ++t) {
    // Slice t: images [first, first + n), the first batch % parts slices one larger.
    const int64_t base = batch_ / parts, extra = batch_ % parts;
    const int64_t n = base + (t < extra ? 1 : 0), first = t * base + std::min<int64_t>(t, extra);
    try {
      omp_set_num_threads(1);  // this thread's own setting: oneDNN plans for one thread
      std::unique_ptr<Worker>& w = workers_[static_cast<size_t>(t)];
      if (!w) w = std::make_unique<Worker>(n, out_channels_, g_, bias_, io_);
      w->run(xb + first * x_image, dyb + first * y_image, layouts);
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(t)] = e.what();
    }
  }
  for (const std::string& e : errors) ST_CHECK(e.empty(), e);
  // The slices' sums in thread order, so the result depends on the slicing only.
  for (const auto& w : workers_) {
    for (size_t i = 0; i < w->dw_oihw.size(); ++i) dw[i] += w->dw_oihw[i];
    for (size_t i = 0; i < w->dbias.size(); ++i) db[i] += w->dbias[i];
  }
}

}  // namespace st::cpu
