#include "models/lstm_lm.h"

#include <cmath>

#include "core/emu/launch.h"
#include "core/kernels/math.h"
#include "layers/init.h"
#include "layers/linear.h"

namespace st {

LstmLm::LstmLm(const LstmLmConfig& c, Rng& rng) : cfg_(c) {
  ST_CHECK(
      c.vocab > 0 && c.emsize > 0 && c.hidden > 0 && c.layers > 0,
      "LSTM language model: vocabulary, --emsize, --hidden and --layers must be positive, got ",
      c.vocab, ", ", c.emsize, ", ", c.hidden, ", ", c.layers);
  ST_CHECK(!c.tied || c.emsize == c.hidden, "--tied needs --emsize equal to --hidden, got ",
           c.emsize, " and ", c.hidden);
  ST_CHECK(c.dropout >= 0.0f && c.dropout < 1.0f, "--dropout must be in [0, 1), got ", c.dropout);
  // Distinct Philox keys for the dropouts (masks depend only on key and call number).
  const uint64_t seed = c.seed * 0x9E3779B97F4A7C15ull;
  encoder_ = std::make_unique<Embedding>(c.vocab, c.emsize, rng, 0.1f);
  drop_in_ = std::make_unique<Dropout>(c.dropout, seed + 1);
  rnn_ = std::make_unique<Lstm>(c.emsize, c.hidden, c.layers, c.dropout, rng, seed + 2);
  drop_out_ = std::make_unique<Dropout>(c.dropout, seed + 3);
  if (c.tied) {
    // Borrows encoder.weight: the embedding's backward, which runs last, announces it.
    decoder_ = std::make_unique<Linear>(encoder_->weight(), true);
  } else {
    auto linear = std::make_unique<Linear>(c.hidden, c.vocab, true, rng);
    init::uniform(linear->weight().value, 0.1f, rng);
    linear->bias()->value.zero();
    decoder_ = std::move(linear);
  }
}

LstmLm::~LstmLm() = default;

std::string LstmLm::describe() const {
  return "LstmLm(vocab " + std::to_string(cfg_.vocab) + ", emsize " + std::to_string(cfg_.emsize) +
         ", hidden " + std::to_string(cfg_.hidden) + ", layers " + std::to_string(cfg_.layers) +
         (cfg_.tied ? ", tied)" : ")");
}

Tensor LstmLm::forward(const Tensor& ids) {
  ST_CHECK(ids.rank() == 2 && ids.dtype() == DType::I32, describe(),
           ": expected int32 token ids [T, B], got ", ids.str());
  steps_ = ids.dim(0);
  batch_ = ids.dim(1);
  Tensor emb = drop_in_->forward(encoder_->forward(ids));  // [T, B, emsize]
  Tensor out = drop_out_->forward(rnn_->forward(emb));     // [T, B, hidden]
  return decoder_->forward(out.reshape(Shape{steps_ * batch_, cfg_.hidden}));
}

Tensor LstmLm::backward(const Tensor& dlogits) {
  auto observed = [&](const char* name, Layer& layer, const Tensor& g) {
    if (observer_) observer_(path_ + name, true);
    Tensor r = layer.backward(g);
    if (observer_) observer_(path_ + name, false);
    return r;
  };
  Tensor g = observed("decoder", *decoder_, dlogits);
  g = drop_out_->backward(g.reshape(Shape{steps_, batch_, cfg_.hidden}));
  g = drop_in_->backward(observed("rnn", *rnn_, g));
  // Tied: the embedding's backward completes encoder.weight's gradient and announces it.
  observed("encoder", *encoder_, g);
  return Tensor();  // token ids have no gradient
}

void LstmLm::visit_params(const std::string& prefix, const ParamVisitor& fn) {
  encoder_->visit_params(prefix + "encoder.", fn);
  rnn_->visit_params(prefix + "rnn.", fn);
  decoder_->visit_params(prefix + "decoder.", fn);
}

void LstmLm::set_training(bool training) {
  Layer::set_training(training);
  for (Layer* l :
       {static_cast<Layer*>(encoder_.get()), static_cast<Layer*>(drop_in_.get()),
        static_cast<Layer*>(rnn_.get()), static_cast<Layer*>(drop_out_.get()), decoder_.get()})
    l->set_training(training);
}

void LstmLm::set_backward_observer(const BackwardObserver& obs, const std::string& prefix) {
  observer_ = obs;
  path_ = prefix;
}

uint64_t LstmLm::dropout_calls() const {
  return drop_in_->calls();
}

void LstmLm::set_dropout_calls(uint64_t calls) {
  drop_in_->set_calls(calls);
  drop_out_->set_calls(calls);
  rnn_->set_dropout_calls(calls);
}

float LmCrossEntropy::forward(Tensor& logits, const Tensor& targets) {
  on_device_ = logits.device().is_cuda();
  if (on_device_) {
    logits_ = Tensor();
    return device_.forward(logits, targets);
  }
  if (logits.device().is_emu()) {
    // The CPU code as one task on the device's stream, on host views of the device
    // tensors; the device tensors themselves are kept for backward's task.
    const float loss = emu::launch_and_wait(logits.device().index, [&] {
      Tensor h = logits.as_host_memory();
      return forward_host(h, targets.as_host_memory());
    });
    logits_ = logits;
    targets_ = targets;
    return loss;
  }
  return forward_host(logits, targets);
}

float LmCrossEntropy::forward_host(Tensor& logits, const Tensor& targets) {
  ST_CHECK(logits.rank() == 2 && logits.dtype() == DType::F32,
           "LmCrossEntropy: expected float32 logits [N, V], got ", logits.str());
  const int64_t n = logits.dim(0), v = logits.dim(1);
  ST_CHECK(targets.dtype() == DType::I32 && targets.numel() == n, "LmCrossEntropy: expected ", n,
           " int32 targets, got ", targets.str());
  const int32_t* y = targets.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    ST_CHECK(y[i] >= 0 && y[i] < v, "LmCrossEntropy: target ", y[i], " at row ", i,
             " is outside the vocabulary [0, ", v, ")");
  logits_ = logits;
  targets_ = targets;
  lse_.resize(n);
  const float* z = logits.f32();
  double loss = 0;
#pragma omp parallel for reduction(+ : loss) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* zi = z + i * v;
    float m = zi[0];
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < v; ++j) m = zi[j] > m ? zi[j] : m;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < v; ++j) s += math::exp_fast(zi[j] - m);
    lse_[i] = m + std::log(s);
    loss += static_cast<double>(lse_[i]) - zi[y[i]];
  }
  return static_cast<float>(loss / static_cast<double>(n));
}

Tensor LmCrossEntropy::backward(float scale) {
  if (on_device_) return device_.backward(scale);
  if (logits_.defined() && logits_.device().is_emu()) {
    Tensor logits = logits_, targets = targets_;
    emu::launch_and_wait(logits.device().index, [&] {
      logits_ = logits.as_host_memory();
      targets_ = targets.as_host_memory();
      return backward_host(scale);
    });
    targets_ = Tensor();
    return logits;  // overwritten in place with dL/dlogits
  }
  return backward_host(scale);
}

Tensor LmCrossEntropy::backward_host(float scale) {
  ST_CHECK(logits_.defined(), "LmCrossEntropy::backward called before forward");
  const int64_t n = logits_.dim(0), v = logits_.dim(1);
  const float s = scale / static_cast<float>(n);
  const int32_t* y = targets_.data<int32_t>();
  float* g = logits_.f32();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float* gi = g + i * v;
    const float lse = lse_[i];
#pragma omp simd
    for (int64_t j = 0; j < v; ++j) gi[j] = s * math::exp_fast(gi[j] - lse);
    gi[y[i]] -= s;
  }
  Tensor out = logits_;
  logits_ = Tensor();
  return out;
}

}  // namespace st
