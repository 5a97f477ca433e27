// Conv2d over NCHW with kernel, stride and zero padding given per direction (rows, columns)
// or as one square value; weight [Cout, Cin, KH, KW] and optional bias (PyTorch names).
// CPU: oneDNN, or im2col per image + OpenBLAS GEMM, images split across threads; CUDA:
// cuDNN (layers/conv2d_cuda.cu).
#pragma once

#include "core/kernels/conv_onednn.h"
#include "core/kernels/half.h"
#include "core/kernels/im2col.h"
#include "core/rng.h"
#include "layers/layer.h"

namespace st {

// CPU algorithm: oneDNN where built (default), or the im2col + GEMM reference.
enum class CpuConvAlgo { Auto, Im2col, OneDnn };

// A size per direction: rows (h) and columns (w), as PyTorch's (kh, kw) tuples.
struct Hw {
  int h, w;
};

class Conv2d : public Layer {
 public:
  ~Conv2d() override { finish_queued_work(); }  // its queued tasks read its members
  Conv2d(int64_t in_channels, int64_t out_channels, int kernel, int stride, int pad, bool bias,
         Rng& rng)
      : Conv2d(in_channels, out_channels, Hw{kernel, kernel}, Hw{stride, stride}, Hw{pad, pad},
               bias, rng) {}
  // Rectangular: Inception's 1x7 with padding {0, 3}, 7x1 with {3, 0} (Szegedy et al. 2016).
  Conv2d(int64_t in_channels, int64_t out_channels, Hw kernel, Hw stride, Hw pad, bool bias,
         Rng& rng);
  std::string describe() const override;
  std::optional<TensorSpec> output_spec(const Tensor& x) const override;
  // dx = dy W runs after W's gradient is announced (the CUDA kernels' order).
  std::vector<const Param*> read_after_announcing() const override { return {weight_}; }
  Param& weight() { return *weight_; }
  Param* bias() { return bias_; }
  int64_t in_channels() const { return cin_; }
  int64_t out_channels() const { return cout_; }
  void set_cpu_algo(CpuConvAlgo algo);
  // Mixed precision (docs/PRECISION.md): BF16 runs oneDNN's bf16 kernels (operands in
  // bf16, results and accumulation in fp32); without oneDNN, and for F16 (no fast fp16 on
  // the CPU), the fp32 kernels run on operands rounded to the 16-bit format, and F16 also
  // rounds the results (y, dx) as fp16 tensors would hold them, so overflow shows as inf.
  // The weight stays the fp32 master copy. CPU only.
  void set_precision(Precision p);
  Precision precision() const { return precision_; }
  // oneDNN's forward implementation for the last input shape ("" before a oneDNN forward).
  std::string onednn_impl() const { return onednn_ ? onednn_->forward_impl() : ""; }
  // Blocked activations (core/layout.h): with oneDNN (fp32 or bf16) the layer reads its
  // input in either layout, and with set_blocked_output(true) writes y blocked when
  // oneDNN computes it that way, and under bf16 writes y in bfloat16. Model builders ask
  // for it where the consumers (BatchNorm, ReLU, the residual add, the next convolution)
  // take blocked and bfloat16 tensors.
  bool takes_blocked() const override { return uses_onednn() && precision_ != Precision::F16; }
  bool takes_bf16() const override { return uses_onednn() && precision_ == Precision::BF16; }
  void set_blocked_output(bool on) { blocked_output_ = on; }

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  cpu::ConvGeometry geometry(const Tensor& x) const;
  // 1x1, stride 1, no padding: the image already is its own column matrix.
  bool is_pointwise() const {
    return kh_ == 1 && kw_ == 1 && sh_ == 1 && sw_ == 1 && ph_ == 0 && pw_ == 0;
  }
  void image_to_columns(const float* xi, const cpu::ConvGeometry& g, float* col, int64_t ld) const;
  bool uses_onednn() const { return algo_ != CpuConvAlgo::Im2col && cpu::onednn_built(); }
  // The format operands are rounded to before fp32 kernels (F32: none).
  Precision emulated() const;
  Tensor forward_im2col(const Tensor& x);
  Tensor backward_im2col(const Tensor& dy);  // dx, dW, db (not marked ready)
  void accumulate_sq_grads(const Tensor& dy);
  int64_t images_per_gemm(const cpu::ConvGeometry& g) const;
  static constexpr int64_t kTargetColumns = 4096;
  static constexpr int64_t kColumnBufferBytes = 1 << 20;

  int64_t cin_, cout_;
  int kh_, kw_, sh_, sw_, ph_, pw_;
  Param* weight_;
  Param* bias_ = nullptr;
  Tensor x_, w_;  // forward's operands as the kernels read them (backward reuses them)
  cpu::ConvGeometry g_{};
  Precision precision_ = Precision::F32;
  CpuConvAlgo algo_ = CpuConvAlgo::Auto;
  bool blocked_output_ = false;
  std::unique_ptr<cpu::OneDnnConv> onednn_;  // primitives for the last input shape
  std::shared_ptr<void> cuda_state_;         // cuDNN descriptors (CUDA build only)
};

}  // namespace st
