// Pieces of a oneDNN convolution shared by OneDnnConv (conv_onednn.cpp) and its bf16
// weight gradients by batch slice (conv_onednn_sliced_wgrad.cpp): the dimensions, the
// three primitive descriptors, and operands staged between sparsetrain's layouts and the
// primitive's. Internal to core/kernels.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "core/error.h"
#include "core/kernels/im2col.h"
#include "core/tensor.h"

namespace st::cpu::onednn {

using dnnl::memory;
using tag = memory::format_tag;

// oneDNN's dimensions of a convolution of `batch` images to `out_channels` channels.
struct ConvDims {
  memory::dims src, wei, dst, bias, strides, pad, pad_r;
};

inline ConvDims conv_dims(int64_t batch, int64_t out_channels, const ConvGeometry& g) {
  // Right padding so that (h + pl + pr - k)/s + 1 == oh exactly.
  return {{batch, g.c, g.h, g.w},
          {out_channels, g.c, g.kh, g.kw},
          {batch, out_channels, g.oh, g.ow},
          {out_channels},
          {g.sh, g.sw},
          {g.ph, g.pw},
          {(g.oh - 1) * g.sh + g.kh - g.h - g.ph, (g.ow - 1) * g.sw + g.kw - g.w - g.pw}};
}

// Memory in the primitive's preferred layout, fed from (or drained to) a user buffer in
// one of sparsetrain's layouts: [0] plain, [1] blocked in 16 channels (activations whose
// channels are a multiple of 16), both of the user data type given to bind(). A layout equal to the
// primitive's is used in place, any other is reordered. The reordered copy lives in a Tensor from
// the host caching allocator only while in use, so layers share those blocks instead of each
// keeping its own (peak memory as PyTorch's).
struct Staged {
  struct User {
    memory mem;
    dnnl::reorder to_internal, to_user;
    bool needs_reorder = false, valid = false;
  };
  User users[2];
  memory internal;
  size_t bytes = 0;
  Tensor buf;
  int cur = 0;
  // `activation`: the operand may also come blocked (when its channels allow).
  void bind(const memory::desc& plain_md, const memory::desc& want, const dnnl::engine& eng,
            bool activation) {
    internal = memory(want, eng, DNNL_MEMORY_NONE);
    bytes = want.get_size();
    add(0, plain_md, eng);
    const memory::dims d = plain_md.dims();
    if (activation && d[1] % 16 == 0)
      add(1, memory::desc(d, plain_md.data_type(), tag::aBcd16b), eng);
  }
  void add(int i, const memory::desc& md, const dnnl::engine& eng) {
    User& u = users[i];
    u.valid = true;
    u.mem = memory(md, eng, DNNL_MEMORY_NONE);
    u.needs_reorder = md != internal.get_desc();
    if (!u.needs_reorder) return;
    u.to_internal = dnnl::reorder(u.mem, internal);
  }
  bool in_place(bool blocked) const {
    const User& u = users[blocked ? 1 : 0];
    return u.valid && !u.needs_reorder;
  }
  void set(const void* p, bool blocked = false) {
    cur = blocked ? 1 : 0;
    ST_CHECK(users[cur].valid, "oneDNN convolution: no blocked layout for this operand");
    if (users[cur].needs_reorder)
      users[cur].mem.set_data_handle(const_cast<void*>(p));
    else
      internal.set_data_handle(const_cast<void*>(p));
  }
  // Gives the reordered copy its storage (for outputs the primitive writes).
  void acquire() {
    if (!users[cur].needs_reorder) return;
    if (!buf.defined()) buf = Tensor::empty({static_cast<int64_t>((bytes + 3) / 4)});
    internal.set_data_handle(buf.raw());
  }
  void in(dnnl::stream& s) {
    if (!users[cur].needs_reorder) return;
    acquire();
    users[cur].to_internal.execute(s, {{DNNL_ARG_FROM, users[cur].mem}, {DNNL_ARG_TO, internal}});
  }
  // Results only: the reorder back to the user's layout is built on the first call, so
  // operands that are only read (and a weight gradient added by its own reorder) never
  // build one.
  void out(dnnl::stream& s) {
    User& u = users[cur];
    if (!u.needs_reorder) return;
    if (!u.to_user) u.to_user = dnnl::reorder(internal, u.mem);
    u.to_user.execute(s, {{DNNL_ARG_FROM, internal}, {DNNL_ARG_TO, u.mem}});
  }
  void release() { buf = Tensor(); }
};

// The three primitive descriptors of one convolution for one algorithm.
struct ConvPds {
  dnnl::convolution_forward::primitive_desc fwd;
  dnnl::convolution_backward_data::primitive_desc bwd_data;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights;
};

inline ConvPds make_pds(dnnl::algorithm alg, const dnnl::engine& eng, const memory::desc& src,
                        const memory::desc& wei, const memory::desc& dst,
                        const memory::desc& diff_src, const memory::desc& diff_wei,
                        const memory::desc& diff_dst, const memory::desc* bias, const ConvDims& d) {
  const memory::dims &strides = d.strides, &pad = d.pad, &pad_r = d.pad_r;
  using dnnl::convolution_backward_data, dnnl::convolution_backward_weights,
      dnnl::convolution_forward;
  const auto train = dnnl::prop_kind::forward_training;
  const convolution_forward::primitive_desc fwd(
      bias ? convolution_forward::desc(train, alg, src, wei, *bias, dst, strides, pad, pad_r)
           : convolution_forward::desc(train, alg, src, wei, dst, strides, pad, pad_r),
      eng);
  const convolution_backward_data::primitive_desc bwd_data(
      convolution_backward_data::desc(alg, diff_src, wei, diff_dst, strides, pad, pad_r), eng, fwd);
  const convolution_backward_weights::primitive_desc bwd_weights(
      bias ? convolution_backward_weights::desc(alg, src, diff_wei, *bias, diff_dst, strides, pad,
                                                pad_r)
           : convolution_backward_weights::desc(alg, src, diff_wei, diff_dst, strides, pad, pad_r),
      eng, fwd);
  return {fwd, bwd_data, bwd_weights};
}

}  // namespace st::cpu::onednn
