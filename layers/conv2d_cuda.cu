// Conv2d on CUDA with cuDNN: forward, backward data and backward filter, each with an
// algorithm chosen by cuDNN's heuristics (cudnnGet*Algorithm_v7: the fastest predicted
// algorithm that succeeds within the workspace cap) and a workspace taken from the
// caching allocator, so a warm loop never calls cudaMalloc. Descriptors and algorithm
// choices live in Conv2d::cuda_state_ and are rebuilt only when the input shape changes.
// Math type: cuDNN's default, which permits TF32 tensor cores on Ampere and newer (the
// PyTorch default for convolutions too); set NVIDIA_TF32_OVERRIDE=0 for strict FP32.
// --precision bf16|fp16: the input, weight and output gradient are converted to 16-bit
// copies (the same rounding as the CPU path, core/kernels/half_math.h), cuDNN convolves
// them with fp32 accumulation, and the results are widened back to fp32; the weight
// gradient is accumulated into the fp32 master gradient and the bias stays fp32.
#include <algorithm>
#include <memory>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/cudnn_desc.h"
#include "core/cuda/half.h"
#include "core/cuda/stream.h"
#include "core/cuda/tensor_check.h"
#include "layers/conv2d.h"

namespace st {

namespace {

// Upper bound on a single convolution's workspace; algorithms needing more are skipped.
constexpr size_t kWorkspaceCap = size_t{1} << 30;

struct ConvCudaState {
  std::vector<int64_t> shape;            // input shape the descriptors describe
  Precision precision = Precision::F32;  // data type of x, w and y
  cuda::TensorDesc x, y, bias;
  cuda::TensorDesc y32;  // the output in fp32: the bias add and the bias gradient
  // 16-bit copies of the input and weight (mixed precision), kept for the backward pass.
  std::unique_ptr<Storage> xh, wh;
  cuda::FilterDesc w;
  cuda::ConvDesc conv;
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo{};
  cudnnMathType_t fwd_math{}, bwd_data_math{}, bwd_filter_math{};
  size_t fwd_ws = 0, bwd_data_ws = 0, bwd_filter_ws = 0;
};

// Picks the first (best-ranked) heuristic result that is supported and fits the cap.
template <typename Perf>
const Perf& pick(const std::vector<Perf>& perf, int returned, const std::string& who,
                 const char* direction) {
  for (int i = 0; i < returned; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kWorkspaceCap) return perf[i];
  ST_THROW(who, ": cuDNN offers no ", direction, " algorithm within a ", kWorkspaceCap >> 20,
           " MiB workspace");
}

void select_algorithms(ConvCudaState& s, cudnnHandle_t h, const std::string& who) {
  int count = 0, returned = 0;
  {
    ST_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(count);
    ST_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
        h, s.x.get(), s.w.get(), s.conv.get(), s.y.get(), count, &returned, perf.data()));
    const auto& p = pick(perf, returned, who, "forward");
    s.fwd_algo = p.algo;
    s.fwd_math = p.mathType;
    s.fwd_ws = p.memory;
  }
  {
    ST_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(count);
    ST_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        h, s.w.get(), s.y.get(), s.conv.get(), s.x.get(), count, &returned, perf.data()));
    const auto& p = pick(perf, returned, who, "backward-data");
    s.bwd_data_algo = p.algo;
    s.bwd_data_math = p.mathType;
    s.bwd_data_ws = p.memory;
  }
  {
    ST_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(count);
    ST_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, s.x.get(), s.y.get(), s.conv.get(), s.w.get(), count, &returned, perf.data()));
    const auto& p = pick(perf, returned, who, "backward-filter");
    s.bwd_filter_algo = p.algo;
    s.bwd_filter_math = p.mathType;
    s.bwd_filter_ws = p.memory;
  }
}

// Scratch memory from the caching allocator; freed (back to the cache) at scope end,
// which is stream-safe because later users of the block run on the same stream.
class Workspace {
 public:
  Workspace(size_t bytes, Device device) {
    if (bytes > 0) storage_ = std::make_unique<Storage>(bytes, device);
  }
  void* data() const { return storage_ ? storage_->data() : nullptr; }

 private:
  std::unique_ptr<Storage> storage_;
};

cudnnDataType_t cudnn_type(Precision p) {
  return p == Precision::BF16  ? CUDNN_DATA_BFLOAT16
         : p == Precision::F16 ? CUDNN_DATA_HALF
                               : CUDNN_DATA_FLOAT;
}

std::unique_ptr<Storage> half_buffer(int64_t n, Device device) {
  return std::make_unique<Storage>(static_cast<size_t>(std::max<int64_t>(n, 1)) * 2, device);
}

// A 16-bit copy (format p) of `t`, on t's device.
std::unique_ptr<Storage> half_copy(Precision p, const Tensor& t) {
  auto h = half_buffer(t.numel(), t.device());
  cuda::pack_half(p, t.f32(), 1.0f, static_cast<uint16_t*>(h->data()), t.numel());
  return h;
}

const uint16_t* bits(const std::unique_ptr<Storage>& h) {
  return static_cast<const uint16_t*>(h->data());
}

}  // namespace

Tensor Conv2d::forward_cuda(const Tensor& x) {
  g_ = geometry(x);
  const Device device = x.device();
  cuda::expect_on(describe(), "input", x, device);
  cuda::expect_on(describe(), "weight", weight_->value, device);
  if (bias_) cuda::expect_on(describe(), "bias", bias_->value, device);
  x_ = x;
  const cpu::ConvGeometry g = g_;
  const int64_t n = x.dim(0);
  const int dev = device.index;
  cuda::DeviceGuard guard(dev);
  Tensor y = Tensor::empty(Shape{n, cout_, g.oh, g.ow}, DType::F32, device);
  if (n == 0) return y;  // cuDNN rejects empty descriptors
  cudnnHandle_t h = cuda::context(dev).cudnn();

  if (!cuda_state_) cuda_state_ = std::make_shared<ConvCudaState>();
  auto& s = *static_cast<ConvCudaState*>(cuda_state_.get());
  const Precision p = precision_;
  const bool half = p != Precision::F32;
  if (s.shape != x.shape().dims() || s.precision != p) {
    const cudnnDataType_t type = cudnn_type(p);
    s.x.set(n, cin_, g.h, g.w, type);
    s.w.set(cout_, cin_, kh_, kw_, type);
    s.conv.set(ph_, pw_, sh_, sw_);
    int on = 0, oc = 0, oh = 0, ow = 0;
    ST_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(s.conv.get(), s.x.get(), s.w.get(), &on,
                                                         &oc, &oh, &ow));
    ST_CHECK(on == n && oc == cout_ && oh == g.oh && ow == g.ow, describe(),
             ": cuDNN output shape [", on, ", ", oc, ", ", oh, ", ", ow,
             "] disagrees with the CPU geometry for input ", x.shape());
    s.y.set(n, cout_, g.oh, g.ow, type);
    s.y32.set(n, cout_, g.oh, g.ow);
    s.bias.set(1, cout_, 1, 1);
    select_algorithms(s, h, describe());
    s.shape = x.shape().dims();
    s.precision = p;
  }

  const float one = 1.0f, zero = 0.0f;
  std::unique_ptr<Storage> yh;
  if (half) {
    s.xh = half_copy(p, x);
    s.wh = half_copy(p, weight_->value);
    yh = half_buffer(y.numel(), device);
  } else {
    s.xh.reset();
    s.wh.reset();
  }
  Workspace ws(s.fwd_ws, device);
  ST_CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), s.fwd_math));
  ST_CUDNN_CHECK(cudnnConvolutionForward(h, &one, s.x.get(), half ? s.xh->data() : x.f32(),
                                         s.w.get(), half ? s.wh->data() : weight_->value.f32(),
                                         s.conv.get(), s.fwd_algo, ws.data(), s.fwd_ws, &zero,
                                         s.y.get(), half ? yh->data() : y.f32()));
  if (half) cuda::unpack_half(p, bits(yh), y.f32(), y.numel());
  if (bias_)
    ST_CUDNN_CHECK(
        cudnnAddTensor(h, &one, s.bias.get(), bias_->value.f32(), &one, s.y32.get(), y.f32()));
  return y;
}

Tensor Conv2d::backward_cuda(const Tensor& dy) {
  const cpu::ConvGeometry g = g_;
  const int64_t n = x_.dim(0);
  expect_shape("gradient", Shape{n, cout_, g.oh, g.ow}, dy.shape());
  const Device device = x_.device();
  cuda::expect_on(describe(), "gradient", dy, device);
  cuda::expect_on(describe(), "weight gradient", weight_->grad, device);
  const int dev = device.index;
  cuda::DeviceGuard guard(dev);
  Tensor dx = Tensor::empty(x_.shape(), DType::F32, device);
  if (n == 0) {
    weight_->mark_grad_ready();
    if (bias_) bias_->mark_grad_ready();
    return dx;
  }
  ST_CHECK(cuda_state_, describe(), ": backward called before a CUDA forward");
  auto& s = *static_cast<ConvCudaState*>(cuda_state_.get());
  cudnnHandle_t h = cuda::context(dev).cudnn();
  const float one = 1.0f, zero = 0.0f;
  const Precision p = s.precision;
  const bool half = p != Precision::F32;
  ST_CHECK(!half || (s.xh && s.wh), describe(), ": backward without the forward's 16-bit copies");
  const std::unique_ptr<Storage> dyh = half ? half_copy(p, dy) : nullptr;
  const void* dyd = half ? dyh->data() : dy.f32();
  {
    // dW += conv_backward_filter(x, dy): beta = 1 accumulates into the gradient; in 16
    // bits the product lands in a 16-bit buffer first and is added to the fp32 gradient.
    Workspace ws(s.bwd_filter_ws, device);
    const int64_t wn = weight_->grad.numel();
    const std::unique_ptr<Storage> dwh = half ? half_buffer(wn, device) : nullptr;
    ST_CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), s.bwd_filter_math));
    ST_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        h, &one, s.x.get(), half ? s.xh->data() : x_.f32(), s.y.get(), dyd, s.conv.get(),
        s.bwd_filter_algo, ws.data(), s.bwd_filter_ws, half ? &zero : &one, s.w.get(),
        half ? dwh->data() : weight_->grad.f32()));
    if (half) cuda::add_half(p, bits(dwh), weight_->grad.f32(), wn);
  }
  weight_->mark_grad_ready();
  if (bias_) {
    cuda::expect_on(describe(), "bias gradient", bias_->grad, device);
    ST_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, s.y32.get(), dy.f32(), &one, s.bias.get(),
                                                bias_->grad.f32()));
    bias_->mark_grad_ready();
  }
  {
    Workspace ws(s.bwd_data_ws, device);
    const std::unique_ptr<Storage> dxh = half ? half_buffer(dx.numel(), device) : nullptr;
    ST_CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv.get(), s.bwd_data_math));
    ST_CUDNN_CHECK(cudnnConvolutionBackwardData(
        h, &one, s.w.get(), half ? s.wh->data() : weight_->value.f32(), s.y.get(), dyd,
        s.conv.get(), s.bwd_data_algo, ws.data(), s.bwd_data_ws, &zero, s.x.get(),
        half ? dxh->data() : dx.f32()));
    if (half) cuda::unpack_half(p, bits(dxh), dx.f32(), dx.numel());
  }
  return dx;
}

}  // namespace st
