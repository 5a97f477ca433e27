#include "core/kernels/conv_onednn_sliced_wgrad.h"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "core/error.h"
#include "core/tensor.h"

namespace st::cpu {

namespace {
using dnnl::memory;
using tag = memory::format_tag;
}  // namespace

// One thread's primitive and buffers for a slice of `n` images, built by that thread the
// first time it runs (with its OpenMP thread count set to 1, so oneDNN plans the
// primitive and its reorders for one thread and never forks or waits inside them).
struct SlicedWeightGrad::Worker {
  int64_t n = 0;
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::convolution_backward_weights prim;
  memory src_user[2], ddst_user[2];  // fp32, [0] plain, [1] blocked in 16 channels
  memory src, ddst, dw, db;          // the primitive's own layouts (bf16 operands)
  size_t src_bytes = 0, ddst_bytes = 0;
  memory dw_user;  // fp32 OIHW
  dnnl::reorder src_in[2], ddst_in[2], dw_out;
  std::vector<float> dw_oihw, dbias;

  Worker(int64_t images, int64_t cout, const ConvGeometry& g, bool bias) : n(images) {
    const memory::dims src_dims{n, g.c, g.h, g.w}, wei_dims{cout, g.c, g.kh, g.kw},
        dst_dims{n, cout, g.oh, g.ow}, strides{g.stride, g.stride}, pad{g.pad, g.pad};
    const memory::dims pad_r{(g.oh - 1) * g.stride + g.kh - g.h - g.pad,
                             (g.ow - 1) * g.stride + g.kw - g.w - g.pad};
    constexpr auto bf16 = memory::data_type::bf16, f32 = memory::data_type::f32;
    const memory::desc src_any(src_dims, bf16, tag::any), ddst_any(dst_dims, bf16, tag::any),
        dw_any(wei_dims, f32, tag::any), bias_md({cout}, f32, tag::x);
    // The backward-weights primitive descriptor needs a forward hint of the same shape.
    const auto fwd_desc = dnnl::convolution_forward::desc(
        dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src_any,
        memory::desc(wei_dims, bf16, tag::any), memory::desc(dst_dims, f32, tag::any), strides, pad,
        pad_r);
    const dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, eng);
    const auto desc =
        bias
            ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any,
                                                       dw_any, bias_md, ddst_any, strides, pad,
                                                       pad_r)
            : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any,
                                                       dw_any, ddst_any, strides, pad, pad_r);
    const dnnl::convolution_backward_weights::primitive_desc pd(desc, eng, fwd_pd);
    prim = dnnl::convolution_backward_weights(pd);
    // The bf16 copies take storage from the host caching allocator only while in use
    // (as OneDnnConv's staged operands), so the layers share those blocks.
    src = memory(pd.src_desc(), eng, DNNL_MEMORY_NONE);
    ddst = memory(pd.diff_dst_desc(), eng, DNNL_MEMORY_NONE);
    src_bytes = pd.src_desc().get_size();
    ddst_bytes = pd.diff_dst_desc().get_size();
    dw = memory(pd.diff_weights_desc(), eng);
    dw_oihw.assign(static_cast<size_t>(cout * g.c * g.kh * g.kw), 0.0f);
    dw_user = memory(memory::desc(wei_dims, f32, tag::oihw), eng, dw_oihw.data());
    dw_out = dnnl::reorder(dw, dw_user);
    if (bias) {
      dbias.assign(static_cast<size_t>(cout), 0.0f);
      db = memory(bias_md, eng, dbias.data());
    }
    bind(src_user, src_in, src, memory::desc(src_dims, f32, tag::nchw), g.c);
    bind(ddst_user, ddst_in, ddst, memory::desc(dst_dims, f32, tag::nchw), cout);
  }

  // User memories (plain and, where the channels allow, blocked) and their reorders
  // into the primitive's layout.
  void bind(memory* user, dnnl::reorder* in, const memory& internal, const memory::desc& plain,
            int64_t channels) {
    user[0] = memory(plain, eng, DNNL_MEMORY_NONE);
    in[0] = dnnl::reorder(user[0], internal);
    if (channels % 16 != 0) return;
    user[1] = memory(memory::desc(plain.dims(), memory::data_type::f32, tag::aBcd16b), eng,
                     DNNL_MEMORY_NONE);
    in[1] = dnnl::reorder(user[1], internal);
  }

  void run(const float* x, const float* dy, const ConvLayouts& layouts) {
    const int xi = layouts.x ? 1 : 0, yi = layouts.y ? 1 : 0;
    ST_CHECK(src_user[xi] && ddst_user[yi],
             "oneDNN convolution: no blocked layout for this operand");
    Tensor src_buf = Tensor::empty({static_cast<int64_t>((src_bytes + 3) / 4)});
    Tensor ddst_buf = Tensor::empty({static_cast<int64_t>((ddst_bytes + 3) / 4)});
    src.set_data_handle(src_buf.raw());
    ddst.set_data_handle(ddst_buf.raw());
    src_user[xi].set_data_handle(const_cast<float*>(x));
    ddst_user[yi].set_data_handle(const_cast<float*>(dy));
    src_in[xi].execute(strm, {{DNNL_ARG_FROM, src_user[xi]}, {DNNL_ARG_TO, src}});
    ddst_in[yi].execute(strm, {{DNNL_ARG_FROM, ddst_user[yi]}, {DNNL_ARG_TO, ddst}});
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, dw}};
    if (db) args[DNNL_ARG_DIFF_BIAS] = db;
    prim.execute(strm, args);
    dw_out.execute(strm, {{DNNL_ARG_FROM, dw}, {DNNL_ARG_TO, dw_user}});
    strm.wait();
  }
};

SlicedWeightGrad::SlicedWeightGrad(int64_t batch, int64_t out_channels, const ConvGeometry& g,
                                   bool bias)
    : batch_(batch), out_channels_(out_channels), g_(g), bias_(bias) {}

SlicedWeightGrad::~SlicedWeightGrad() = default;

void SlicedWeightGrad::run(const float* x, const float* dy, float* dw, float* db,
                           const ConvLayouts& layouts, int threads) {
  const int parts = static_cast<int>(std::min<int64_t>(std::max(threads, 1), batch_));
  if (static_cast<int>(workers_.size()) != parts) {
    workers_.clear();
    workers_.resize(static_cast<size_t>(parts));
  }
  const int64_t x_image = g_.c * g_.h * g_.w, y_image = out_channels_ * g_.oh * g_.ow;
  std::vector<std::string> errors(static_cast<size_t>(parts));
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int t = 0; t < parts; ++t) {
    // Slice t: images [first, first + n), the first batch % parts slices one larger.
    const int64_t base = batch_ / parts, extra = batch_ % parts;
    const int64_t n = base + (t < extra ? 1 : 0), first = t * base + std::min<int64_t>(t, extra);
    try {
      omp_set_num_threads(1);  // this thread's own setting: oneDNN plans for one thread
      std::unique_ptr<Worker>& w = workers_[static_cast<size_t>(t)];
      if (!w) w = std::make_unique<Worker>(n, out_channels_, g_, bias_);
      w->run(x + first * x_image, dy + first * y_image, layouts);
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
