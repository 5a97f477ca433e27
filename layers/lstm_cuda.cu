// LSTM on CUDA through cuDNN's RNN API (cudnnRNNForward, cudnnRNNBackwardData_v8,
// cudnnRNNBackwardWeights_v8). Each layer runs as a one-layer cuDNN RNN, so the dropout
// between layers is this library's Philox Dropout (the same masks as the CPU) rather than
// cuDNN's own. cuDNN keeps the weights of a layer in one packed buffer whose blocks are
// W_ih and W_hh per gate (i, f, g, o: PyTorch's order) and then the biases; our
// parameters live in the flat gradient-bucket buffer instead, so forward copies them in
// (cudnnGetRNNWeightParams gives each block's address) and backward adds cuDNN's packed
// weight gradient back into Param::grad, keeping the accumulate-and-announce contract.
#include <climits>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/cudnn_desc.h"
#include "core/cuda/stream.h"
#include "core/cuda/tensor_check.h"
#include "core/ops.h"
#include "layers/lstm.h"

namespace st {

namespace {

class RnnDesc {
 public:
  RnnDesc() { ST_CUDNN_CHECK(cudnnCreateRNNDescriptor(&d_)); }
  ~RnnDesc() { (void)cudnnDestroyRNNDescriptor(d_); }
  RnnDesc(const RnnDesc&) = delete;
  RnnDesc& operator=(const RnnDesc&) = delete;
  cudnnRNNDescriptor_t get() const { return d_; }

 private:
  cudnnRNNDescriptor_t d_ = nullptr;
};

class RnnDataDesc {
 public:
  RnnDataDesc() { ST_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&d_)); }
  ~RnnDataDesc() { (void)cudnnDestroyRNNDataDescriptor(d_); }
  RnnDataDesc(const RnnDataDesc&) = delete;
  RnnDataDesc& operator=(const RnnDataDesc&) = delete;
  // Sequence-major [T, B, vec], every sequence of full length T.
  void set(int64_t steps, int64_t batch, int64_t vec) {
    const int t = cuda::cudnn_dim(steps, "T"), b = cuda::cudnn_dim(batch, "B");
    std::vector<int> lengths(b, t);
    ST_CUDNN_CHECK(
        cudnnSetRNNDataDescriptor(d_, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, t,
                                  b, cuda::cudnn_dim(vec, "features"), lengths.data(), nullptr));
  }
  cudnnRNNDataDescriptor_t get() const { return d_; }

 private:
  cudnnRNNDataDescriptor_t d_ = nullptr;
};

class DropoutDesc {
 public:
  DropoutDesc() { ST_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&d_)); }
  ~DropoutDesc() { (void)cudnnDestroyDropoutDescriptor(d_); }
  DropoutDesc(const DropoutDesc&) = delete;
  DropoutDesc& operator=(const DropoutDesc&) = delete;
  cudnnDropoutDescriptor_t get() const { return d_; }

 private:
  cudnnDropoutDescriptor_t d_ = nullptr;
};

// [1, B, H] state tensors (cuDNN wants rank 3 with explicit strides).
class StateDesc {
 public:
  StateDesc() { ST_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_)); }
  ~StateDesc() { (void)cudnnDestroyTensorDescriptor(d_); }
  StateDesc(const StateDesc&) = delete;
  StateDesc& operator=(const StateDesc&) = delete;
  void set(int64_t batch, int64_t hidden) {
    const int dims[3] = {1, cuda::cudnn_dim(batch, "B"), cuda::cudnn_dim(hidden, "H")};
    const int strides[3] = {dims[1] * dims[2], dims[2], 1};
    ST_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d_, CUDNN_DATA_FLOAT, 3, dims, strides));
  }
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

Tensor device_bytes(size_t bytes, Device device) {
  return Tensor::empty(Shape{static_cast<int64_t>((bytes + 3) / 4)}, DType::F32, device);
}

void* data_or_null(const Tensor& t) {
  return t.defined() && t.numel() > 0 ? t.raw() : nullptr;
}

}  // namespace

struct Lstm::CudnnState {
  struct LayerState {
    RnnDesc rnn;
    RnnDataDesc xdesc, ydesc;
    size_t weight_bytes = 0;
    Tensor weights, dweights;       // cuDNN's packed layout
    Tensor x, y, hx, cx, reserve;   // saved by forward for backward
    std::vector<float*> w_blocks;   // 8 matrices (W_ih i,f,g,o then W_hh), in `weights`
    std::vector<float*> b_blocks;   // 8 bias vectors, in `weights`
    std::vector<float*> dw_blocks;  // the same blocks in `dweights`
    std::vector<float*> db_blocks;
  };
  int device = -1;
  int64_t steps = 0, batch = 0;
  DropoutDesc dropout;
  Tensor dropout_states;
  StateDesc hdesc;
  Tensor seq_lengths;  // int32 [B] on the device, all T
  std::vector<std::unique_ptr<LayerState>> layers;
  bool training = true;
};

void Lstm::CudnnStateDeleter::operator()(CudnnState* s) const {
  delete s;
}

namespace {

// Addresses of the 8 weight blocks and 8 bias blocks of a one-layer LSTM in `space`.
void block_addresses(cudnnHandle_t handle, cudnnRNNDescriptor_t rnn, size_t bytes, void* space,
                     std::vector<float*>& w, std::vector<float*>& b) {
  cuda::TensorDesc mdesc, bdesc;
  w.assign(8, nullptr);
  b.assign(8, nullptr);
  for (int lin = 0; lin < 8; ++lin) {
    void* m = nullptr;
    void* v = nullptr;
    ST_CUDNN_CHECK(cudnnGetRNNWeightParams(handle, rnn, 0, bytes, space, lin, mdesc.get(), &m,
                                           bdesc.get(), &v));
    w[lin] = static_cast<float*>(m);
    b[lin] = static_cast<float*>(v);
  }
}

}  // namespace

void Lstm::prepare_cudnn(Device device, int64_t T, int64_t B) {
  const int dev = device.index;
  cudnnHandle_t handle = cuda::context(dev).cudnn();
  const int64_t H = hidden_;
  if (!cudnn_ || cudnn_->device != dev) {
    cudnn_.reset(new CudnnState);
    cudnn_->device = dev;
    size_t state_bytes = 0;
    ST_CUDNN_CHECK(cudnnDropoutGetStatesSize(handle, &state_bytes));
    cudnn_->dropout_states = device_bytes(state_bytes, device);
    ST_CUDNN_CHECK(cudnnSetDropoutDescriptor(cudnn_->dropout.get(), handle, 0.0f,
                                             data_or_null(cudnn_->dropout_states), state_bytes, 0));
    for (int l = 0; l < layers_; ++l) {
      auto L = std::make_unique<CudnnState::LayerState>();
      const int64_t in_l = l == 0 ? in_ : H;
      ST_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
          L->rnn.get(), CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
          CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
          CUDNN_FMA_MATH,  // plain FP32 FMA (no TF32), so results track the CPU
          cuda::cudnn_dim(in_l, "input"), cuda::cudnn_dim(H, "hidden"),
          cuda::cudnn_dim(H, "projection"), 1, cudnn_->dropout.get(),
          CUDNN_RNN_PADDED_IO_DISABLED));
      ST_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle, L->rnn.get(), &L->weight_bytes));
      L->weights = device_bytes(L->weight_bytes, device);
      L->dweights = device_bytes(L->weight_bytes, device);
      block_addresses(handle, L->rnn.get(), L->weight_bytes, L->weights.raw(), L->w_blocks,
                      L->b_blocks);
      block_addresses(handle, L->rnn.get(), L->weight_bytes, L->dweights.raw(), L->dw_blocks,
                      L->db_blocks);
      cudnn_->layers.push_back(std::move(L));
    }
    cudnn_->steps = cudnn_->batch = -1;
  }
  CudnnState& s = *cudnn_;
  if (s.steps == T && s.batch == B) return;
  s.steps = T;
  s.batch = B;
  s.hdesc.set(B, H);
  s.seq_lengths =
      Tensor::from_vector_i32(std::vector<int32_t>(B, static_cast<int32_t>(T)), Shape{B})
          .to(device);
  for (int l = 0; l < layers_; ++l) {
    s.layers[l]->xdesc.set(T, B, l == 0 ? in_ : H);
    s.layers[l]->ydesc.set(T, B, H);
  }
}

Tensor Lstm::forward_cudnn_layer(int l, const Tensor& input, const Tensor& h0, const Tensor& c0) {
  CudnnState& s = *cudnn_;
  CudnnState::LayerState& L = *s.layers[l];
  const Device device = input.device();
  cuda::Context& ctx = cuda::context(device.index);
  cudnnHandle_t handle = ctx.cudnn();
  const cudaStream_t stream = ctx.stream();
  const int64_t T = steps_, B = batch_, H = hidden_, BH = B * H, in_l = l == 0 ? in_ : H;
  const cudnnForwardMode_t mode = training_ ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
  // Our parameters into cuDNN's packed blocks (gate k = rows [k H, (k + 1) H)).
  for (int k = 0; k < 4; ++k) {
    ST_CUDA_CHECK(cudaMemcpyAsync(L.w_blocks[k], w_ih_[l]->value.f32() + k * H * in_l,
                                  H * in_l * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    ST_CUDA_CHECK(cudaMemcpyAsync(L.w_blocks[4 + k], w_hh_[l]->value.f32() + k * H * H,
                                  H * H * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    ST_CUDA_CHECK(cudaMemcpyAsync(L.b_blocks[k], b_ih_[l]->value.f32() + k * H, H * sizeof(float),
                                  cudaMemcpyDeviceToDevice, stream));
    ST_CUDA_CHECK(cudaMemcpyAsync(L.b_blocks[4 + k], b_hh_[l]->value.f32() + k * H,
                                  H * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  }
  size_t work_bytes = 0, reserve_bytes = 0;
  ST_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(handle, L.rnn.get(), mode, L.xdesc.get(), &work_bytes,
                                           &reserve_bytes));
  Tensor work = device_bytes(work_bytes, device);
  L.reserve = device_bytes(reserve_bytes, device);
  L.x = input;
  L.y = Tensor::empty(Shape{T, B, H}, DType::F32, device);
  L.hx = h0.slice_flat(l * BH, Shape{1, B, H});
  L.cx = c0.slice_flat(l * BH, Shape{1, B, H});
  ST_CUDNN_CHECK(cudnnRNNForward(
      handle, L.rnn.get(), mode, s.seq_lengths.data<int32_t>(), L.xdesc.get(), input.raw(),
      L.ydesc.get(), L.y.raw(), s.hdesc.get(), L.hx.raw(), final_h_.f32() + l * BH, s.hdesc.get(),
      L.cx.raw(), final_c_.f32() + l * BH, L.weight_bytes, L.weights.raw(), work_bytes,
      data_or_null(work), reserve_bytes, data_or_null(L.reserve)));
  return L.y;
}

Tensor Lstm::forward_cuda(const Tensor& x) {
  check_input(x);
  const Device device = x.device();
  cuda::DeviceGuard guard(device.index);
  const int64_t T = x.dim(0), B = x.dim(1), H = hidden_;
  for (int l = 0; l < layers_; ++l) {
    cuda::expect_on(describe(), "weight_ih", w_ih_[l]->value, device);
    cuda::expect_on(describe(), "weight_hh", w_hh_[l]->value, device);
  }
  steps_ = T;
  batch_ = B;
  // (Re)build the descriptors when the device or the shapes change.
  prepare_cudnn(device, T, B);
  cudnn_->training = training_;
  Tensor h0, c0;
  initial_state(B, device, h0, c0);
  final_h_ = Tensor::empty(Shape{layers_, B, H}, DType::F32, device);
  final_c_ = Tensor::empty(Shape{layers_, B, H}, DType::F32, device);
  dh_final_ = Tensor();
  dc_final_ = Tensor();
  Tensor input = x;
  for (int l = 0; l < layers_; ++l) {
    Tensor out = forward_cudnn_layer(l, input, h0, c0);
    if (l + 1 < layers_ && !drop_.empty()) out = drop_[l]->forward(out);
    input = out;
  }
  return input;
}

Tensor Lstm::backward_cuda(const Tensor& dy) {
  ST_CHECK(cudnn_ && !cudnn_->layers.empty() && cudnn_->layers[0]->x.defined(), describe(),
           ": backward called before a CUDA forward");
  CudnnState& s = *cudnn_;
  ST_CHECK(s.training, describe(),
           ": backward after an evaluation-mode forward (cuDNN keeps "
           "no reserve space then); run forward in training mode");
  const int64_t T = steps_, B = batch_, H = hidden_, BH = B * H;
  expect_shape("gradient", Shape{T, B, H}, dy.shape());
  const Device device = dy.device();
  cuda::expect_on(describe(), "gradient", dy, device);
  const int dev = device.index;
  cuda::DeviceGuard guard(dev);
  cuda::Context& ctx = cuda::context(dev);
  cudnnHandle_t handle = ctx.cudnn();
  const cudaStream_t stream = ctx.stream();
  dh0_ = Tensor::empty(Shape{layers_, B, H}, DType::F32, device);
  dc0_ = Tensor::empty(Shape{layers_, B, H}, DType::F32, device);
  Tensor grad = dy;
  for (int l = layers_ - 1; l >= 0; --l) {
    CudnnState::LayerState& L = *s.layers[l];
    const int64_t in_l = l == 0 ? in_ : H;
    if (l + 1 < layers_ && !drop_.empty()) grad = drop_[l]->backward(grad);
    size_t work_bytes = 0, reserve_bytes = 0;
    ST_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(handle, L.rnn.get(), CUDNN_FWD_MODE_TRAINING,
                                             L.xdesc.get(), &work_bytes, &reserve_bytes));
    Tensor work = device_bytes(work_bytes, device);
    Tensor dx = Tensor::empty(Shape{T, B, in_l}, DType::F32, device);
    const void* dhy = dh_final_.defined() ? dh_final_.f32() + l * BH : nullptr;
    const void* dcy = dc_final_.defined() ? dc_final_.f32() + l * BH : nullptr;
    Tensor gy = grad.reshape(Shape{T, B, H});
    ST_CUDNN_CHECK(cudnnRNNBackwardData_v8(
        handle, L.rnn.get(), s.seq_lengths.data<int32_t>(), L.ydesc.get(), L.y.raw(), gy.raw(),
        L.xdesc.get(), dx.raw(), s.hdesc.get(), L.hx.raw(), dhy, dh0_.f32() + l * BH, s.hdesc.get(),
        L.cx.raw(), dcy, dc0_.f32() + l * BH, L.weight_bytes, L.weights.raw(), work_bytes,
        data_or_null(work), reserve_bytes, data_or_null(L.reserve)));
    ST_CUDA_CHECK(cudaMemsetAsync(L.dweights.raw(), 0, L.weight_bytes, stream));
    ST_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(
        handle, L.rnn.get(), CUDNN_WGRAD_MODE_ADD, s.seq_lengths.data<int32_t>(), L.xdesc.get(),
        L.x.raw(), s.hdesc.get(), L.hx.raw(), L.ydesc.get(), L.y.raw(), L.weight_bytes,
        L.dweights.raw(), work_bytes, data_or_null(work), reserve_bytes, data_or_null(L.reserve)));
    // Accumulate cuDNN's packed gradient into the parameters (the layer contract's +=).
    for (int k = 0; k < 4; ++k) {
      cuda::add_inplace(dev, w_ih_[l]->grad.f32() + k * H * in_l, L.dw_blocks[k], H * in_l);
      cuda::add_inplace(dev, w_hh_[l]->grad.f32() + k * H * H, L.dw_blocks[4 + k], H * H);
      cuda::add_inplace(dev, b_ih_[l]->grad.f32() + k * H, L.db_blocks[k], H);
      cuda::add_inplace(dev, b_hh_[l]->grad.f32() + k * H, L.db_blocks[4 + k], H);
    }
    mark_layer_ready(l);
    grad = dx;
  }
  return grad;
}

}  // namespace st
