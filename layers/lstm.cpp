#include "layers/lstm.h"

#include <cmath>
#include <cstring>

#include "core/kernels/blas.h"
#include "core/kernels/math.h"
#include "core/ops.h"
#include "layers/init.h"

namespace st {

namespace {

// Elementwise work below this many units stays on one thread (a step of a small model is
// a few thousand units: waking threads would cost more than the math).
constexpr int64_t kParallelUnits = 32768;

// The fused cell of one time step over the batch. gates [B, 4H] holds the pre-activations
// (blocks i, f, g, o per row) and receives the activations; c, h are [B, H].
void cell_forward(float* gates, const float* c_prev, float* c, float* h, int64_t batch,
                  int64_t hidden) {
#pragma omp parallel for if (batch * hidden > kParallelUnits) schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    float* ai = gates + b * 4 * hidden;
    float* af = ai + hidden;
    float* ag = af + hidden;
    float* ao = ag + hidden;
    const float* cp = c_prev + b * hidden;
    float* cb = c + b * hidden;
    float* hb = h + b * hidden;
#pragma omp simd
    for (int64_t j = 0; j < hidden; ++j)
      math::lstm_cell_forward(ai[j], af[j], ag[j], ao[j], cp[j], cb[j], hb[j]);
  }
}

// Backward of one step over the batch: dh [B, H] is dL/dh_t (output and recurrence),
// dc [B, H] holds dL/dc_t from step t+1 on entry and dL/dc_{t-1} on return; dgates
// [B, 4H] receives dL/d(pre-activations).
void cell_backward(const float* gates, const float* c_prev, const float* c, const float* dh,
                   float* dc, float* dgates, int64_t batch, int64_t hidden) {
#pragma omp parallel for if (batch * hidden > kParallelUnits) schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    const float* gi = gates + b * 4 * hidden;
    const float* gf = gi + hidden;
    const float* gg = gf + hidden;
    const float* go = gg + hidden;
    float* di = dgates + b * 4 * hidden;
    float* df = di + hidden;
    float* dg = df + hidden;
    float* dout = dg + hidden;
    const float* cp = c_prev + b * hidden;
    const float* cb = c + b * hidden;
    const float* dhb = dh + b * hidden;
    float* dcb = dc + b * hidden;
#pragma omp simd
    for (int64_t j = 0; j < hidden; ++j)
      math::lstm_cell_backward(gi[j], gf[j], gg[j], go[j], cp[j], cb[j], dhb[j], dcb[j], di[j],
                               df[j], dg[j], dout[j], dcb[j]);
  }
}

void add_to(float* dst, const float* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace

Lstm::Lstm(int64_t input_size, int64_t hidden_size, int num_layers, float dropout, Rng& rng,
           uint64_t dropout_seed)
    : in_(input_size), hidden_(hidden_size), layers_(num_layers), dropout_(dropout) {
  ST_CHECK(input_size > 0 && hidden_size > 0 && num_layers > 0,
           "LSTM: sizes must be positive, got input ", input_size, ", hidden ", hidden_size,
           ", layers ", num_layers);
  ST_CHECK(dropout >= 0.0f && dropout < 1.0f, "LSTM: dropout must be in [0, 1), got ", dropout);
  const float bound = 1.0f / std::sqrt(static_cast<float>(hidden_));
  for (int l = 0; l < layers_; ++l) {
    const std::string k = "_l" + std::to_string(l);
    const int64_t in_l = l == 0 ? in_ : hidden_;
    w_ih_.push_back(&add_param("weight_ih" + k, Shape{4 * hidden_, in_l}, ParamKind::Weight));
    w_hh_.push_back(&add_param("weight_hh" + k, Shape{4 * hidden_, hidden_}, ParamKind::Weight));
    b_ih_.push_back(&add_param("bias_ih" + k, Shape{4 * hidden_}, ParamKind::Bias));
    b_hh_.push_back(&add_param("bias_hh" + k, Shape{4 * hidden_}, ParamKind::Bias));
    for (Param* p : {w_ih_[l], w_hh_[l], b_ih_[l], b_hh_[l]}) init::uniform(p->value, bound, rng);
    if (dropout_ > 0.0f && l + 1 < layers_)
      drop_.push_back(std::make_unique<Dropout>(dropout_, dropout_seed + 1000003ull * (l + 1)));
  }
}

std::string Lstm::describe() const {
  std::string s = "LSTM(" + std::to_string(in_) + "->" + std::to_string(hidden_) + ", layers " +
                  std::to_string(layers_);
  if (dropout_ > 0.0f) s += ", dropout " + std::to_string(dropout_);
  return s + ")";
}

void Lstm::set_training(bool training) {
  Layer::set_training(training);
  for (auto& d : drop_) d->set_training(training);
}

uint64_t Lstm::dropout_calls() const {
  return drop_.empty() ? 0 : drop_.front()->calls();
}

void Lstm::set_dropout_calls(uint64_t calls) {
  for (auto& d : drop_) d->set_calls(calls);
}

void Lstm::freeze_dropout(bool frozen) {
  for (auto& d : drop_) d->freeze_mask(frozen);
}

void Lstm::set_state(const Tensor& h0, const Tensor& c0) {
  ST_CHECK(h0.rank() == 3 && h0.dim(0) == layers_ && h0.dim(2) == hidden_, describe(),
           ": expected an initial h of shape [", layers_, ", B, ", hidden_, "], got ", h0.shape());
  check_shape("LSTM::set_state", "c0", h0.shape(), c0.shape());
  // Copies, queued on the device's stream: carrying the state between windows does not
  // make the host wait for the GPU.
  h0_ = Tensor::empty(h0.shape(), h0.dtype(), h0.device());
  c0_ = Tensor::empty(c0.shape(), c0.dtype(), c0.device());
  copy_async(h0_, h0);
  copy_async(c0_, c0);
}

void Lstm::reset_state() {
  h0_ = Tensor();
  c0_ = Tensor();
}

void Lstm::set_final_state_grad(const Tensor& dh, const Tensor& dc) {
  ST_CHECK(final_h_.defined(), describe(), ": set_final_state_grad before forward");
  check_shape("LSTM::set_final_state_grad", "dh", final_h_.shape(), dh.shape());
  check_shape("LSTM::set_final_state_grad", "dc", final_c_.shape(), dc.shape());
  dh_final_ = dh;
  dc_final_ = dc;
}

void Lstm::check_input(const Tensor& x) const {
  ST_CHECK(x.dtype() == DType::F32 && x.rank() == 3 && x.dim(2) == in_, describe(),
           ": expected a float32 input of shape [T, B, ", in_, "], got ", x.str());
  ST_CHECK(x.dim(0) > 0 && x.dim(1) > 0, describe(), ": empty input ", x.shape());
}

void Lstm::initial_state(int64_t batch, Device device, Tensor& h0, Tensor& c0) const {
  if (!h0_.defined()) {
    h0 = Tensor::zeros(Shape{layers_, batch, hidden_}, DType::F32, device);
    c0 = Tensor::zeros(Shape{layers_, batch, hidden_}, DType::F32, device);
    return;
  }
  ST_CHECK(h0_.dim(1) == batch, describe(), ": the initial state has batch ", h0_.dim(1),
           " but the input has batch ", batch, " (reset_state() when the batch size changes)");
  h0 = h0_.to(device);
  c0 = c0_.to(device);
}

void Lstm::mark_layer_ready(int l) {
  w_ih_[l]->mark_grad_ready();
  w_hh_[l]->mark_grad_ready();
  b_ih_[l]->mark_grad_ready();
  b_hh_[l]->mark_grad_ready();
}

Tensor Lstm::forward_cpu(const Tensor& x) {
  check_input(x);
  const int64_t T = x.dim(0), B = x.dim(1), H = hidden_, G = 4 * hidden_, BH = B * H;
  steps_ = T;
  batch_ = B;
  Tensor h0, c0;
  initial_state(B, x.device(), h0, c0);
  final_h_ = Tensor::empty(Shape{layers_, B, H});
  final_c_ = Tensor::empty(Shape{layers_, B, H});
  dh_final_ = Tensor();
  dc_final_ = Tensor();
  x_.assign(layers_, Tensor());
  gates_.assign(layers_, Tensor());
  h_.assign(layers_, Tensor());
  c_.assign(layers_, Tensor());
  Tensor input = x.reshape(Shape{T * B, in_});
  for (int l = 0; l < layers_; ++l) {
    const int64_t in_l = l == 0 ? in_ : H;
    x_[l] = input;
    gates_[l] = Tensor::empty(Shape{T, B, G});
    h_[l] = Tensor::empty(Shape{T + 1, B, H});
    c_[l] = Tensor::empty(Shape{T + 1, B, H});
    float* gates = gates_[l].f32();
    float* hs = h_[l].f32();
    float* cs = c_[l].f32();
    std::memcpy(hs, h0.f32() + l * BH, BH * sizeof(float));
    std::memcpy(cs, c0.f32() + l * BH, BH * sizeof(float));
    // a = x W_ih^T + b_ih + b_hh for every step at once: rows start as the bias sum, then
    // one GEMM over all T*B rows adds the input projection.
    std::vector<float> bias(G);
    const float* bi = b_ih_[l]->value.f32();
    const float* bh = b_hh_[l]->value.f32();
    for (int64_t j = 0; j < G; ++j) bias[j] = bi[j] + bh[j];
    for (int64_t r = 0; r < T * B; ++r) std::memcpy(gates + r * G, bias.data(), G * sizeof(float));
    cpu::gemm(false, true, T * B, G, in_l, 1.0f, input.f32(), w_ih_[l]->value.f32(), 1.0f, gates);
    const float* whh = w_hh_[l]->value.f32();
    for (int64_t t = 0; t < T; ++t) {
      float* at = gates + t * B * G;
      // a_t += h_{t-1} W_hh^T, then the cell (math::lstm_cell_forward).
      cpu::gemm(false, true, B, G, H, 1.0f, hs + t * BH, whh, 1.0f, at);
      cell_forward(at, cs + t * BH, cs + (t + 1) * BH, hs + (t + 1) * BH, B, H);
    }
    std::memcpy(final_h_.f32() + l * BH, hs + T * BH, BH * sizeof(float));
    std::memcpy(final_c_.f32() + l * BH, cs + T * BH, BH * sizeof(float));
    Tensor out = h_[l].slice_flat(BH, Shape{T * B, H});
    if (l + 1 < layers_ && !drop_.empty()) out = drop_[l]->forward(out);
    input = out;
  }
  return input.reshape(Shape{T, B, H});
}

Tensor Lstm::backward_cpu(const Tensor& dy) {
  ST_CHECK(!x_.empty() && x_[0].defined(), describe(), ": backward called before forward");
  const int64_t T = steps_, B = batch_, H = hidden_, G = 4 * hidden_, BH = B * H;
  expect_shape("gradient", Shape{T, B, H}, dy.shape());
  dh0_ = Tensor::empty(Shape{layers_, B, H});
  dc0_ = Tensor::empty(Shape{layers_, B, H});
  Tensor grad = dy.reshape(Shape{T * B, H});  // dL/d(this layer's output)
  for (int l = layers_ - 1; l >= 0; --l) {
    const int64_t in_l = l == 0 ? in_ : H;
    if (l + 1 < layers_ && !drop_.empty()) grad = drop_[l]->backward(grad);
    // dh[t] = dL/dh_{t+1} from above; the recurrent part dh_t W_hh is added step by step.
    Tensor dh = grad.clone();
    float* dhp = dh.f32();
    if (dh_final_.defined()) add_to(dhp + (T - 1) * BH, dh_final_.f32() + l * BH, BH);
    float* dc = dc0_.f32() + l * BH;  // dL/dc_t, carried backwards in place
    if (dc_final_.defined())
      std::memcpy(dc, dc_final_.f32() + l * BH, BH * sizeof(float));
    else
      std::memset(dc, 0, BH * sizeof(float));
    Tensor dgates = Tensor::empty(Shape{T, B, G});
    float* dg = dgates.f32();
    const float* gates = gates_[l].f32();
    const float* hs = h_[l].f32();
    const float* cs = c_[l].f32();
    const float* whh = w_hh_[l]->value.f32();
    for (int64_t t = T - 1; t >= 0; --t) {
      cell_backward(gates + t * B * G, cs + t * BH, cs + (t + 1) * BH, dhp + t * BH, dc,
                    dg + t * B * G, B, H);
      // dh_{t-1} += da_t W_hh (into step t-1's slot, or dL/dh0 at t = 0).
      float* dh_prev = t > 0 ? dhp + (t - 1) * BH : dh0_.f32() + l * BH;
      cpu::gemm(false, false, B, H, G, 1.0f, dg + t * B * G, whh, t > 0 ? 1.0f : 0.0f, dh_prev);
    }
    // Whole-sequence parameter gradients: dW_ih += da^T x, dW_hh += da^T h_{t-1}, and
    // both biases receive the column sums of da.
    cpu::gemm(true, false, G, in_l, T * B, 1.0f, dg, x_[l].f32(), 1.0f, w_ih_[l]->grad.f32());
    cpu::gemm(true, false, G, H, T * B, 1.0f, dg, hs, 1.0f, w_hh_[l]->grad.f32());
    std::vector<float> colsum(G, 0.0f);
    for (int64_t r = 0; r < T * B; ++r) add_to(colsum.data(), dg + r * G, G);
    add_to(b_ih_[l]->grad.f32(), colsum.data(), G);
    add_to(b_hh_[l]->grad.f32(), colsum.data(), G);
    mark_layer_ready(l);
    // dx = da W_ih, the gradient into the layer below (or the input).
    Tensor dx = Tensor::empty(Shape{T * B, in_l});
    cpu::gemm(false, false, T * B, in_l, G, 1.0f, dg, w_ih_[l]->value.f32(), 0.0f, dx.f32());
    grad = dx;
  }
  return grad.reshape(Shape{T, B, in_});
}

}  // namespace st
