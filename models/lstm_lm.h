// The LSTM language model of Zaremba et al. 2014 (sec. 4.1), in the form of PyTorch's
// word_language_model example: embedding -> dropout -> multi-layer LSTM (dropout between
// layers) -> dropout -> linear decoder over the vocabulary. Parameter names match the
// example's RNNModel (encoder.weight, rnn.weight_ih_l0, ..., decoder.weight,
// decoder.bias), so checkpoints map onto it.
//
// Weight tying (Press & Wolf 2017; Inan et al. 2017): with `tied`, the decoder multiplies
// by the embedding matrix itself (emsize must equal hidden). There is then ONE parameter,
// encoder.weight, with two uses: the decoder's backward adds dL/dW of the output layer
// into encoder.weight's gradient WITHOUT announcing it, and the embedding's backward,
// which always runs last, adds its scatter and announces gradient-ready once. The reducer
// therefore sees a single, complete gradient.
//
// forward() takes int32 token ids [T, B] and returns logits [T*B, vocab]; the LSTM state
// (h, c) persists between calls (truncated BPTT): reset_state() zeros it,
// detach_state() makes the last window's final state the next window's initial state.
#pragma once

#include <memory>
#include <vector>

#include "core/rng.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/lstm.h"
#include "layers/softmax_cross_entropy.h"

namespace st {

struct LstmLmConfig {
  int64_t vocab = 10000;
  int64_t emsize = 200;
  int64_t hidden = 200;
  int layers = 2;
  float dropout = 0.2f;  // on the embedding output, between LSTM layers and before the decoder
  bool tied = false;
  uint64_t seed = 0;  // dropout masks
};

class LstmLm : public Layer {
 public:
  // Initialisation as the PyTorch example: encoder and decoder weights U(-0.1, 0.1),
  // decoder bias 0, LSTM parameters U(-1/sqrt(H), 1/sqrt(H)).
  LstmLm(const LstmLmConfig& config, Rng& rng);
  ~LstmLm() override;
  std::string describe() const override;
  const LstmLmConfig& config() const { return cfg_; }

  Tensor forward(const Tensor& ids) override;
  Tensor backward(const Tensor& dlogits) override;
  void visit_params(const std::string& prefix, const ParamVisitor& fn) override;
  void set_training(bool training) override;
  void set_backward_observer(const BackwardObserver& obs, const std::string& prefix) override;

  Embedding& encoder() { return *encoder_; }
  Lstm& rnn() { return *rnn_; }
  // Truncated BPTT: zeros for the next window, or the last window's final state.
  void reset_state() { rnn_->reset_state(); }
  void detach_state() { rnn_->set_state(rnn_->final_h(), rnn_->final_c()); }
  // Dropout masks drawn so far (every dropout draws once per training forward): the RNG
  // state a checkpoint stores for an exact resume.
  uint64_t dropout_calls() const;
  void set_dropout_calls(uint64_t calls);

 protected:
  Tensor forward_cpu(const Tensor& x) override { return forward(x); }
  Tensor backward_cpu(const Tensor& dy) override { return backward(dy); }

 private:
  LstmLmConfig cfg_;
  std::unique_ptr<Embedding> encoder_;
  std::unique_ptr<Dropout> drop_in_, drop_out_;
  std::unique_ptr<Lstm> rnn_;
  LayerPtr decoder_;  // Linear, tied to encoder.weight with --tied
  BackwardObserver observer_;
  std::string path_;  // observer prefix
  int64_t steps_ = 0, batch_ = 0;
};

// The model's loss: softmax cross-entropy over the vocabulary, mean over the T*B rows,
// -log softmax(z)_y = log sum_j exp(z_j - m) + m - z_y with m the row maximum. The same
// value as SoftmaxCrossEntropy (tests compare), shaped for [T*B, V] rows with V ~ 10^4:
// rows in parallel, a vectorised exp, and backward writes the gradient over the logits
// (no second [T*B, V] buffer, recomputing the exponentials instead of storing them).
// Logits on a GPU go to SoftmaxCrossEntropy's CUDA kernels (the same function, one warp
// per row; the gradient is then a new tensor).
class LmCrossEntropy {
 public:
  // Mean loss over rows; remembers `logits` (not copied) and each row's log-sum-exp.
  float forward(Tensor& logits, const Tensor& targets);
  // dL/dlogits = scale * (softmax - onehot) / N, written IN PLACE over the logits of the
  // last forward(), which are gone afterwards. Returns that tensor.
  Tensor backward(float scale = 1.0f);

 private:
  // The CPU code (on the CPU, or inside an emulated device's task).
  float forward_host(Tensor& logits, const Tensor& targets);
  Tensor backward_host(float scale);
  Tensor logits_, targets_;
  std::vector<float> lse_;  // per row: m + log sum exp(z - m)
  bool on_device_ = false;  // the last forward ran on CUDA, through device_
  SoftmaxCrossEntropy device_;
};

}  // namespace st
