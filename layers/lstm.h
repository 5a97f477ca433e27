// LSTM: a stack of `num_layers` long short-term memory layers (Hochreiter & Schmidhuber
// 1997, forget gate of Gers et al. 2000) over a sequence-first input x [T, B, input_size],
// giving the top layer's hidden states y [T, B, hidden]. PyTorch's nn.LSTM layout: gate
// order i, f, g, o in the rows of weight_ih_l{k} [4H, in_k], weight_hh_l{k} [4H, H],
// bias_ih_l{k} and bias_hh_l{k} [4H], so checkpoints load into torch and back. Dropout
// (Zaremba et al. 2014, sec. 3) acts on each layer's output except the last.
//
// State: forward() starts from the state (h0, c0), each [num_layers, B, H], given by
// set_state() (zeros after reset_state() or when none is set) and leaves the final state
// in final_h()/final_c(). Truncated BPTT carries the state between windows by passing the
// final state of one window as the initial state of the next: set_state() copies, so no
// gradient flows across windows (the state is detached). backward() also returns
// dL/dh0 and dL/dc0 (initial_h_grad/initial_c_grad) and takes an optional gradient into
// the final state (set_final_state_grad), which is how a caller chains windows or checks
// gradients through the state.
//
// CPU: per layer, the input projection of every time step is ONE GEMM over [T*B, in];
// each step then adds h_{t-1} W_hh^T (one GEMM over the batch) and runs the fused cell of
// core/kernels/math.h. Backward through time mirrors it: per step the cell backward and
// one GEMM for dh_{t-1}; the weight gradients, bias sums and dx are whole-sequence GEMMs.
// CUDA (lstm_cuda.cu): cuDNN's RNN API on the same packed parameters.
#pragma once

#include <memory>
#include <vector>

#include "core/rng.h"
#include "layers/dropout.h"
#include "layers/layer.h"

namespace st {

class Lstm : public Layer {
 public:
  // Parameters uniform in [-1/sqrt(H), 1/sqrt(H)] (nn.LSTM's default); dropout masks
  // come from Philox keyed by dropout_seed.
  Lstm(int64_t input_size, int64_t hidden_size, int num_layers, float dropout, Rng& rng,
       uint64_t dropout_seed = 0);
  std::string describe() const override;

  int64_t input_size() const { return in_; }
  int64_t hidden_size() const { return hidden_; }
  int num_layers() const { return layers_; }
  Param& weight_ih(int layer) { return *w_ih_[layer]; }
  Param& weight_hh(int layer) { return *w_hh_[layer]; }
  Param& bias_ih(int layer) { return *b_ih_[layer]; }
  Param& bias_hh(int layer) { return *b_hh_[layer]; }

  // The initial state of the next forward(): copies of h0, c0 [num_layers, B, H].
  void set_state(const Tensor& h0, const Tensor& c0);
  // Zeros as the initial state of the next forward(), for any batch size.
  void reset_state();
  // The state after the last forward() (the next window's initial state).
  const Tensor& final_h() const { return final_h_; }
  const Tensor& final_c() const { return final_c_; }
  // dL/dh_T and dL/dc_T added at the end of the next backward() (zero unless set;
  // cleared by every forward()).
  void set_final_state_grad(const Tensor& dh, const Tensor& dc);
  // dL/dh0 and dL/dc0 computed by the last backward().
  const Tensor& initial_h_grad() const { return dh0_; }
  const Tensor& initial_c_grad() const { return dc0_; }

  void set_training(bool training) override;
  // Dropout masks drawn so far (RNG state for checkpoints) and mask freezing for tests.
  uint64_t dropout_calls() const;
  void set_dropout_calls(uint64_t calls);
  void freeze_dropout(bool frozen);

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  void check_input(const Tensor& x) const;
  // The initial state for a batch of `batch` on `device` (zeros when none is set).
  void initial_state(int64_t batch, Device device, Tensor& h0, Tensor& c0) const;
  void mark_layer_ready(int layer);

  int64_t in_, hidden_;
  int layers_;
  float dropout_;
  std::vector<Param*> w_ih_, w_hh_, b_ih_, b_hh_;
  std::vector<std::unique_ptr<Dropout>> drop_;  // after layers 0 .. L-2
  Tensor h0_, c0_;                              // set_state(); undefined = zeros
  Tensor final_h_, final_c_, dh_final_, dc_final_, dh0_, dc0_;
  // Forward caches, per layer: its input [T*B, in_l], gate activations [T, B, 4H], and
  // h, c over [T+1, B, H] with the initial state at step 0.
  int64_t steps_ = 0, batch_ = 0;
  std::vector<Tensor> x_, gates_, h_, c_;
#ifdef SPARSETRAIN_WITH_CUDA
  // cuDNN descriptors, packed weights and reserve space (lstm_cuda.cu).
  struct CudnnState;
  struct CudnnStateDeleter {
    void operator()(CudnnState* s) const;
  };
  std::unique_ptr<CudnnState, CudnnStateDeleter> cudnn_;
  // Builds the descriptors for `device` when it changes and sets them for the shapes.
  void prepare_cudnn(Device device, int64_t steps, int64_t batch);
  // Layer `layer`'s cuDNN forward from `input` and its slice of the initial state; writes
  // its slice of the final state and returns its output (before dropout).
  Tensor forward_cudnn_layer(int layer, const Tensor& input, const Tensor& h0, const Tensor& c0);
#endif
};

}  // namespace st
