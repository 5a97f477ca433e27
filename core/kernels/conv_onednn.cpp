#include "core/kernels/conv_onednn.h"

#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/kernels/conv_onednn_parts.h"
#include "core/kernels/conv_onednn_sliced_wgrad.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace st::cpu {

bool onednn_built() {
  return true;
}

namespace {
using namespace onednn;
constexpr auto f32 = memory::data_type::f32;
constexpr auto bf16 = memory::data_type::bf16;

// Winograd F(4x4, 3x3) (Lavin & Gray 2016; oneDNN's jit_wino_4x3) does 2.25x fewer
// multiplies per output than the direct method but adds input and output transforms:
// oneDNN's forward + both backward passes took 0.39-0.75x the direct method's time for
// 3x3 stride-1 maps with 32-512 channels (56x56 down to 7x7) and 1.17x with 16 channels
// (bench/winograd_bench; docs/RESULTS.md, "Winograd"). Like oneDNN's bf16 weight-gradient
// kernel it waits for its threads in spin loops, which collapse when the cores are
// shared, so a process sharing its cores (core/parallel.h) keeps the direct method.
// Rounding: its transforms add a few ulp per output beyond the direct method's
// (ConvAlgorithms.OneDnnMatchesIm2col holds it to 1e-4). SPARSETRAIN_WINOGRAD=off keeps
// the direct method everywhere (the bits of builds before this choice, and the A/B
// figures in docs/RESULTS.md).
bool winograd_pays(int64_t out_channels, const ConvGeometry& g) {
  static const bool off = [] {
    const char* v = std::getenv("SPARSETRAIN_WINOGRAD");
    return v != nullptr && std::string(v) == "off";
  }();
  if (off) return false;
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.ph == 1 && g.pw == 1 && g.c >= 32 &&
         g.c % 16 == 0 && out_channels % 16 == 0 && !cores_shared();
}
}  // namespace

struct OneDnnConv::Impl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  int64_t batch;
  ConvGeometry g;
  int64_t cout;
  bool has_bias;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;
  Staged src, wei, dst;                       // forward
  Staged wei_d, diff_dst_d, diff_src;         // backward data
  Staged src_w, diff_dst_w, diff_wei;         // backward weights
  bool reuse_wei = false, reuse_src = false;  // backward layouts equal forward's
  bool reuse_diff_dst = false;                // both backward passes want one layout
  memory bias_mem, diff_bias_mem;
  int64_t weight_elems = 0;
  // dw += the weight gradient reordered from the primitive's layout, in one pass (the
  // layer contract accumulates); only when that layout is not dw's.
  dnnl::reorder diff_wei_add;
  std::vector<float> db_tmp;
  std::string fwd_impl;
  std::unique_ptr<SlicedWeightGrad> sliced_wgrad;  // bf16 weight gradients (its header says why)
  ConvDTypes io;
};

OneDnnConv::OneDnnConv(int64_t batch, int64_t out_channels, const ConvGeometry& g, bool bias,
                       bool bf16_operands, ConvDTypes io)
    : impl_(std::make_unique<Impl>()) {
  ST_CHECK(bf16_operands || (!io.x_bf16 && !io.y_bf16),
           "oneDNN convolution: bfloat16 activations need the bf16 primitives");
  Impl& m = *impl_;
  m.io = io;
  m.batch = batch;
  m.g = g;
  m.cout = out_channels;
  m.has_bias = bias;
  const ConvDims d = conv_dims(batch, out_channels, g);
  const memory::dims &src_dims = d.src, &wei_dims = d.wei, &dst_dims = d.dst;
  // Operands in `in` (bf16 or f32); y and dx in their activations' types; bias and
  // accumulation in f32.
  const auto in = bf16_operands ? bf16 : f32;
  const auto x_type = io.x_bf16 ? bf16 : f32, y_type = io.y_bf16 ? bf16 : f32;
  const memory::desc src_any(src_dims, in, tag::any), wei_any(wei_dims, in, tag::any),
      dst_any(dst_dims, y_type, tag::any), bias_md(d.bias, f32, tag::x);
  const memory::desc diff_src_any(src_dims, x_type, tag::any),
      diff_wei_any(wei_dims, f32, tag::any), diff_dst_any(dst_dims, in, tag::any);
  const memory::desc src_user(src_dims, x_type, tag::nchw), wei_user(wei_dims, f32, tag::oihw),
      dst_user(dst_dims, y_type, tag::nchw);

  // Winograd F(4x4, 3x3) where it pays (see winograd_pays); direct otherwise, and wherever
  // oneDNN has no Winograd kernel for this CPU or shape.
  ConvPds pds;
  bool made = false;
  if (!bf16_operands && winograd_pays(out_channels, g)) {
    try {
      pds = make_pds(dnnl::algorithm::convolution_winograd, m.eng, src_any, wei_any, dst_any,
                     diff_src_any, diff_wei_any, diff_dst_any, bias ? &bias_md : nullptr, d);
      made = true;
    } catch (const dnnl::error&) {
    }
  }
  if (!made)
    pds = make_pds(dnnl::algorithm::convolution_direct, m.eng, src_any, wei_any, dst_any,
                   diff_src_any, diff_wei_any, diff_dst_any, bias ? &bias_md : nullptr, d);
  const auto& fwd_pd = pds.fwd;
  const auto& bwd_data_pd = pds.bwd_data;
  const auto& bwd_w_pd = pds.bwd_weights;
  m.fwd_impl = fwd_pd.impl_info_str();

  m.fwd = dnnl::convolution_forward(fwd_pd);
  m.bwd_data = dnnl::convolution_backward_data(bwd_data_pd);
  m.bwd_weights = dnnl::convolution_backward_weights(bwd_w_pd);
  m.src.bind(src_user, fwd_pd.src_desc(), m.eng, true);
  m.wei.bind(wei_user, fwd_pd.weights_desc(), m.eng, false);
  m.dst.bind(dst_user, fwd_pd.dst_desc(), m.eng, true);
  m.wei_d.bind(wei_user, bwd_data_pd.weights_desc(), m.eng, false);
  m.diff_dst_d.bind(dst_user, bwd_data_pd.diff_dst_desc(), m.eng, true);
  m.diff_src.bind(src_user, bwd_data_pd.diff_src_desc(), m.eng, true);
  m.src_w.bind(src_user, bwd_w_pd.src_desc(), m.eng, true);
  m.diff_dst_w.bind(dst_user, bwd_w_pd.diff_dst_desc(), m.eng, true);
  m.diff_wei.bind(wei_user, bwd_w_pd.diff_weights_desc(), m.eng, false);
  m.reuse_src = bwd_w_pd.src_desc() == fwd_pd.src_desc();
  m.reuse_wei = bwd_data_pd.weights_desc() == fwd_pd.weights_desc();
  m.reuse_diff_dst = bwd_w_pd.diff_dst_desc() == bwd_data_pd.diff_dst_desc();
  m.weight_elems = out_channels * g.c * g.kh * g.kw;
  if (m.diff_wei.users[0].needs_reorder) {
    dnnl::post_ops add;
    add.append_sum(1.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(add);
    m.diff_wei_add = dnnl::reorder(
        dnnl::reorder::primitive_desc(m.eng, bwd_w_pd.diff_weights_desc(), m.eng, wei_user, attr));
  }
  if (bf16_operands)
    m.sliced_wgrad = std::make_unique<SlicedWeightGrad>(batch, out_channels, g, bias, io);
  if (bias) {
    m.bias_mem = memory(bias_md, m.eng, DNNL_MEMORY_NONE);
    m.db_tmp.resize(out_channels);
    m.diff_bias_mem = memory(bias_md, m.eng, m.db_tmp.data());
  }
}

OneDnnConv::~OneDnnConv() = default;

bool OneDnnConv::matches(int64_t batch, const ConvGeometry& g, ConvDTypes io) const {
  const ConvGeometry& h = impl_->g;
  return batch == impl_->batch && g.c == h.c && g.h == h.h && g.w == h.w && g.kh == h.kh &&
         g.kw == h.kw && g.sh == h.sh && g.sw == h.sw && g.ph == h.ph && g.pw == h.pw &&
         io == impl_->io;
}

std::string OneDnnConv::forward_impl() const {
  return impl_->fwd_impl;
}

ConvDTypes OneDnnConv::io() const {
  return impl_->io;
}

bool OneDnnConv::writes_blocked_in_place() const {
  return impl_->dst.in_place(true);
}

void OneDnnConv::forward(const void* x, const float* w, const float* b, void* y,
                         const ConvLayouts& layouts) {
  Impl& m = *impl_;
  m.src.set(x, layouts.x);
  m.wei.set(w);
  m.dst.set(y, layouts.y);
  m.src.in(m.strm);
  m.wei.in(m.strm);
  m.dst.acquire();
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, m.src.internal},
                                       {DNNL_ARG_WEIGHTS, m.wei.internal},
                                       {DNNL_ARG_DST, m.dst.internal}};
  if (m.has_bias) {
    m.bias_mem.set_data_handle(const_cast<float*>(b));
    args[DNNL_ARG_BIAS] = m.bias_mem;
  }
  m.fwd.execute(m.strm, args);
  m.dst.out(m.strm);
  m.strm.wait();
  // Reordered operands are not kept until backward (which reorders again): holding them
  // would cost one extra activation copy per convolution layer, and the blocked weights
  // of every layer at once at the start of backward, where memory peaks.
  m.src.release();
  m.wei.release();
  m.dst.release();
}

void OneDnnConv::backward(const void* x, const float* w, const void* dy, float* dw, float* db,
                          void* dx, const ConvLayouts& layouts) {
  Impl& m = *impl_;
  // Backward may want other layouts than forward; each input is staged for the
  // primitive that reads it, once.
  m.wei.set(w);
  m.wei.in(m.strm);
  memory wei = m.wei.internal;
  if (!m.reuse_wei) {
    m.wei_d.set(w);
    m.wei_d.in(m.strm);
    wei = m.wei_d.internal;
  }
  m.diff_dst_d.set(dy, layouts.y);
  m.diff_dst_d.in(m.strm);
  m.diff_src.set(dx, layouts.x);
  m.diff_src.acquire();
  m.bwd_data.execute(m.strm, {{DNNL_ARG_DIFF_DST, m.diff_dst_d.internal},
                              {DNNL_ARG_WEIGHTS, wei},
                              {DNNL_ARG_DIFF_SRC, m.diff_src.internal}});
  m.diff_src.out(m.strm);
  m.strm.wait();
  m.diff_src.release();
  m.wei.release();
  m.wei_d.release();
  if (m.sliced_wgrad && num_threads() > 1 && cores_shared()) {
    m.diff_dst_d.release();
    m.sliced_wgrad->run(x, dy, dw, db, layouts, num_threads());
    return;
  }

  Staged& src = m.reuse_src ? m.src : m.src_w;
  src.set(x, layouts.x);
  src.in(m.strm);
  memory diff_dst = m.diff_dst_d.internal;
  if (!m.reuse_diff_dst) {
    m.diff_dst_w.set(dy, layouts.y);
    m.diff_dst_w.in(m.strm);
    diff_dst = m.diff_dst_w.internal;
  }
  // Where the primitive writes dw's layout, the gradient goes to a block of the caching
  // allocator for the call's duration (shared by all layers) and is added below.
  const bool add_by_reorder = m.diff_wei.users[0].needs_reorder;
  Tensor dw_tmp;
  if (!add_by_reorder) dw_tmp = Tensor::empty({m.weight_elems});
  m.diff_wei.set(add_by_reorder ? static_cast<void*>(dw) : dw_tmp.raw());
  m.diff_wei.acquire();
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src.internal},
                                       {DNNL_ARG_DIFF_DST, diff_dst},
                                       {DNNL_ARG_DIFF_WEIGHTS, m.diff_wei.internal}};
  if (m.has_bias) args[DNNL_ARG_DIFF_BIAS] = m.diff_bias_mem;
  m.bwd_weights.execute(m.strm, args);
  if (add_by_reorder)
    m.diff_wei_add.execute(
        m.strm, {{DNNL_ARG_FROM, m.diff_wei.internal}, {DNNL_ARG_TO, m.diff_wei.users[0].mem}});
  m.strm.wait();
  src.release();
  m.diff_dst_d.release();
  m.diff_dst_w.release();
  m.diff_wei.release();
  // The layer contract accumulates parameter gradients.
  if (!add_by_reorder) {
    const float* fresh = dw_tmp.f32();
    for (int64_t i = 0; i < m.weight_elems; ++i) dw[i] += fresh[i];
  }
  for (size_t i = 0; i < m.db_tmp.size(); ++i) db[i] += m.db_tmp[i];
}

}  // namespace st::cpu
