#include "tests/layers/layer_cases.h"

#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "layers/batchnorm2d.h"
#include "layers/concat.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/flatten.h"
#include "layers/halves_product.h"
#include "layers/linear.h"
#include "layers/lstm.h"
#include "layers/pair_embedding.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"
#include "layers/sequential.h"
#include "layers/softmax_cross_entropy.h"
#include "layers/squeeze_excite.h"
#include "models/global_max_pool.h"
#include "models/lstm_lm.h"
#include "models/shortcut_pad.h"

namespace st::test {
namespace {

// --- inputs and builders shared by several rows -------------------------------------------

std::function<Tensor(Rng&)> random_input(const Shape& shape) {
  return [shape](Rng& rng) { return random_tensor(shape, rng); };
}

std::function<Tensor(Rng&)> fixed_ids(const std::vector<int32_t>& ids, const Shape& shape) {
  return [ids, shape](Rng&) { return Tensor::from_vector_i32(ids, shape); };
}

template <typename L, typename... Args>
std::function<LayerPtr()> simple(Args... args) {
  return [=] { return std::make_unique<L>(args...); };
}

// A Conv2d whose weights come from Rng(seed).
std::function<LayerPtr()> conv(uint64_t seed, int cin, int cout, int k, int stride, int pad,
                               bool bias, Precision precision = Precision::F32) {
  return [=] {
    Rng rng(seed);
    auto c = std::make_unique<Conv2d>(cin, cout, k, stride, pad, bias, rng);
    c->set_precision(precision);
    return c;
  };
}

// A rectangular Conv2d (kernel, stride and padding per direction) from Rng(seed).
std::function<LayerPtr()> conv_hw(uint64_t seed, int cin, int cout, Hw kernel, Hw stride, Hw pad,
                                  bool bias) {
  return [=] {
    Rng rng(seed);
    return std::make_unique<Conv2d>(cin, cout, kernel, stride, pad, bias, rng);
  };
}

std::function<LayerPtr()> linear(uint64_t seed, int in, int out, bool bias,
                                 Precision precision = Precision::F32) {
  return [=] {
    Rng rng(seed);
    auto fc = std::make_unique<Linear>(in, out, bias, rng);
    fc->set_precision(precision);
    return fc;
  };
}

LayerCase row(std::string name, std::function<LayerPtr()> make, const Shape& input) {
  LayerCase c;
  c.name = std::move(name);
  c.make = std::move(make);
  c.input = random_input(input);
  return c;
}

// A CPU gradient-check row: default options unless given.
LayerCase grad_row(std::string name, std::function<LayerPtr()> make, const Shape& input,
                   GradCheckOptions opt = {}) {
  LayerCase c = row(std::move(name), std::move(make), input);
  c.gradcheck = opt;
  return c;
}

// A CUDA-vs-CPU row.
LayerCase device_row(std::string name, std::function<LayerPtr()> make, const Shape& input,
                     Tol tol = {}) {
  LayerCase c = row(std::move(name), std::move(make), input);
  c.cuda = tol;
  return c;
}

// The LSTM with its state exposed as input and output, so the shared harness checks
// dL/dx, dL/dh0, dL/dc0 and every parameter, with a loss that also reads (h_T, c_T):
// input = [x (T*B*I) | h0 (L*B*H) | c0 (L*B*H)], output = [y (T*B*H) | h_T | c_T].
class LstmWithState : public Layer {
 public:
  LstmWithState(int64_t steps, int64_t batch, std::unique_ptr<Lstm> lstm)
      : t_(steps),
        b_(batch),
        lstm_(std::move(lstm)),
        state_(lstm_->num_layers() * batch * lstm_->hidden_size()) {}
  std::string describe() const override { return "LstmWithState(" + lstm_->describe() + ")"; }
  void visit_params(const std::string& prefix, const ParamVisitor& fn) override {
    lstm_->visit_params(prefix, fn);
  }

 protected:
  Tensor forward_cpu(const Tensor& in) override {
    const int64_t nx = t_ * b_ * lstm_->input_size(), ny = t_ * b_ * lstm_->hidden_size();
    const Shape state{lstm_->num_layers(), b_, lstm_->hidden_size()};
    lstm_->set_state(in.slice_flat(nx, state), in.slice_flat(nx + state_, state));
    Tensor y = lstm_->forward(in.slice_flat(0, Shape{t_, b_, lstm_->input_size()}).clone());
    Tensor out = Tensor::empty(Shape{ny + 2 * state_});
    out.slice_flat(0, y.shape()).copy_from(y);
    out.slice_flat(ny, state).copy_from(lstm_->final_h());
    out.slice_flat(ny + state_, state).copy_from(lstm_->final_c());
    return out;
  }
  Tensor backward_cpu(const Tensor& dout) override {
    const int64_t nx = t_ * b_ * lstm_->input_size(), ny = t_ * b_ * lstm_->hidden_size();
    const Shape state{lstm_->num_layers(), b_, lstm_->hidden_size()};
    lstm_->set_final_state_grad(dout.slice_flat(ny, state).clone(),
                                dout.slice_flat(ny + state_, state).clone());
    Tensor dx = lstm_->backward(dout.slice_flat(0, Shape{t_, b_, lstm_->hidden_size()}).clone());
    Tensor din = Tensor::empty(Shape{nx + 2 * state_});
    din.slice_flat(0, dx.shape()).copy_from(dx);
    din.slice_flat(nx, state).copy_from(lstm_->initial_h_grad());
    din.slice_flat(nx + state_, state).copy_from(lstm_->initial_c_grad());
    return din;
  }

 private:
  int64_t t_, b_;
  std::unique_ptr<Lstm> lstm_;
  int64_t state_;
};

LayerCase lstm_row(std::string name, int64_t input, int64_t hidden, int layers, float dropout,
                   int64_t steps, int64_t batch) {
  auto make = [=] {
    Rng rng(31 + layers);
    auto lstm = std::make_unique<Lstm>(input, hidden, layers, dropout, rng, 5);
    lstm->freeze_dropout(true);  // the same masks in every finite-difference forward
    return std::make_unique<LstmWithState>(steps, batch, std::move(lstm));
  };
  GradCheckOptions opt;
  opt.eps = 5e-3f;
  opt.max_points = 40;
  const int64_t numel = steps * batch * input + 2 * layers * batch * hidden;
  LayerCase c = grad_row(std::move(name), make, {numel}, opt);
  c.gradcheck_seed = 77;
  return c;
}

// The whole language model, untied and tied: with tying, encoder.weight collects the
// decoder's and the embedding's gradient and announces gradient-ready exactly once (the
// harness counts announcements).
LayerCase lm_row(std::string name, bool tied) {
  auto make = [tied] {
    LstmLmConfig c;
    c.vocab = 11;
    c.emsize = 4;
    c.hidden = 4;
    c.layers = 2;
    c.dropout = 0.0f;
    c.tied = tied;
    Rng rng(41);
    auto lm = std::make_unique<LstmLm>(c, rng);
    // Larger weights than the default U(-0.1, 0.1), so every path carries signal.
    Rng init(42);
    lm->visit_params("", [&](const std::string&, Param& p) {
      p.value.copy_from(random_tensor(p.value.shape(), init, 0.5f));
    });
    return lm;
  };
  GradCheckOptions opt;
  opt.check_input = false;
  opt.eps = 5e-3f;
  opt.max_points = 30;
  LayerCase c = grad_row(std::move(name), make, {}, opt);
  c.input = fixed_ids({1, 4, 10, 4, 0, 7, 3, 3, 9}, {3, 3});
  return c;
}

std::vector<LayerCase> gradient_check_rows();
std::vector<LayerCase> cuda_rows();

}  // namespace

const std::vector<LayerCase>& layer_cases() {
  static const std::vector<LayerCase> cases = [] {
    std::vector<LayerCase> all = gradient_check_rows();
    for (LayerCase& c : cuda_rows()) all.push_back(std::move(c));
    return all;
  }();
  return cases;
}

namespace {

std::vector<LayerCase> convolution_rows() {
  // Every convolution case runs on both CPU algorithms: the im2col + GEMM reference and
  // oneDNN (when built).
  auto conv_row = [](std::string name, int cin, int cout, int k, int stride, int pad, bool bias,
                     const Shape& in) {
    LayerCase c =
        grad_row(std::move(name), conv(cin * 100 + cout, cin, cout, k, stride, pad, bias), in);
    c.each_conv_algo = true;
    return c;
  };
  // Inception-v4's asymmetric kernels (Szegedy et al. 2016, figs. 5-7).
  auto rect_row = [](std::string name, int cin, int cout, Hw k, Hw stride, Hw pad, bool bias,
                     const Shape& in) {
    LayerCase c =
        grad_row(std::move(name),
                 conv_hw(cin * 100 + cout + k.h * 10 + k.w, cin, cout, k, stride, pad, bias), in);
    c.each_conv_algo = true;
    return c;
  };
  return {conv_row("Conv2d3x3Stride1PadBias", 3, 4, 3, 1, 1, true, {2, 3, 6, 6}),
          conv_row("Conv2d3x3Stride2NoBias", 4, 5, 3, 2, 1, false, {2, 4, 7, 7}),
          conv_row("Conv2d1x1Pointwise", 4, 3, 1, 1, 0, true, {3, 4, 5, 5}),
          conv_row("Conv2d1x1Stride2", 4, 6, 1, 2, 0, false, {2, 4, 6, 6}),
          conv_row("Conv2d7x7Stride2Pad3", 2, 3, 7, 2, 3, false, {2, 2, 9, 9}),
          rect_row("Conv2d1x7Pad0x3", 3, 4, {1, 7}, {1, 1}, {0, 3}, false, {2, 3, 5, 8}),
          rect_row("Conv2d7x1Pad3x0Bias", 3, 2, {7, 1}, {1, 1}, {3, 0}, true, {2, 3, 8, 5}),
          rect_row("Conv2d1x3Pad0x1", 4, 3, {1, 3}, {1, 1}, {0, 1}, false, {2, 4, 4, 5}),
          rect_row("Conv2d3x1Pad1x0", 4, 3, {3, 1}, {1, 1}, {1, 0}, false, {2, 4, 5, 4}),
          // Every field differs between rows and columns, so a swapped pair changes the shape.
          rect_row("Conv2d3x5Stride2x1Pad1x2", 2, 3, {3, 5}, {2, 1}, {1, 2}, true, {2, 2, 7, 6})};
}

std::vector<LayerCase> normalisation_rows() {
  GradCheckOptions small_eps;
  small_eps.eps = 3e-3f;
  LayerCase eval = grad_row("BatchNorm2dEval",
                            [] {
                              auto bn = std::make_unique<BatchNorm2d>(3);
                              Rng rng(7);
                              bn->running_mean().copy_from(random_tensor({3}, rng));
                              bn->weight().value.copy_from(random_tensor({3}, rng));
                              return bn;
                            },
                            {2, 3, 4, 4});
  eval.training = false;
  return {grad_row(
              "BatchNorm2dTrain",
              [] {
                auto bn = std::make_unique<BatchNorm2d>(3);
                Rng rng(6);
                bn->weight().value.copy_from(random_tensor({3}, rng));
                bn->bias().value.copy_from(random_tensor({3}, rng));
                return bn;
              },
              {4, 3, 3, 3}, small_eps),
          eval};
}

// Residual Add with a projection shortcut, inside a Sequential: the containers route
// gradients through both branches and every parameter announces itself once.
LayerPtr residual_projection_block() {
  Rng rng(9);
  auto main = std::make_unique<Sequential>();
  main->add("conv1", std::make_unique<Conv2d>(3, 4, 3, 2, 1, false, rng));
  main->add("bn1", std::make_unique<BatchNorm2d>(4));
  main->add("relu", std::make_unique<ReLU>());
  main->add("conv2", std::make_unique<Conv2d>(4, 4, 3, 1, 1, false, rng));
  auto shortcut = std::make_unique<Sequential>();
  shortcut->add("0", std::make_unique<Conv2d>(3, 4, 1, 2, 0, false, rng));
  auto block = std::make_unique<Sequential>();
  block->add("", std::make_unique<Residual>(std::move(main), std::move(shortcut)));
  block->add("head", std::make_unique<Flatten>());
  return block;
}

LayerPtr residual_identity_block() {
  Rng rng(10);
  auto main = std::make_unique<Sequential>();
  main->add("conv1", std::make_unique<Conv2d>(3, 3, 3, 1, 1, true, rng));
  return std::make_unique<Residual>(std::move(main));
}

// An Inception-style join (Szegedy et al. 2015): a 1x1 branch, a 1x1 -> 3x3 branch with
// BatchNorm and ReLU, and a 3x3 max-pool -> 1x1 branch, concatenated on channels.
LayerPtr concat_block() {
  Rng rng(14);
  auto join = std::make_unique<Concat>();
  auto b1 = std::make_unique<Sequential>();
  b1->add("0", std::make_unique<Conv2d>(3, 2, 1, 1, 0, true, rng));
  auto b2 = std::make_unique<Sequential>();
  b2->add("0", std::make_unique<Conv2d>(3, 2, 1, 1, 0, true, rng));
  b2->add("1", std::make_unique<BatchNorm2d>(2));
  b2->add("2", std::make_unique<ReLU>());
  b2->add("3", std::make_unique<Conv2d>(2, 3, 3, 1, 1, true, rng));
  auto b3 = std::make_unique<Sequential>();
  b3->add("0", std::make_unique<MaxPool2d>(3, 1, 1));
  b3->add("1", std::make_unique<Conv2d>(3, 1, 1, 1, 0, true, rng));
  join->add("b1", std::move(b1)).add("b2", std::move(b2)).add("b3", std::move(b3));
  return join;
}

// Squeeze-and-excitation (Hu et al. 2018) over 8 channels reduced to 2.
LayerPtr squeeze_excite_block() {
  Rng rng(15);
  return std::make_unique<SqueezeExcite>(8, 2, rng);
}

// NCF's structure in small (models/ncf.h): a GMF branch (PairEmbedding, HalvesProduct)
// and an MLP branch (PairEmbedding, Linear, ReLU) joined as vectors, then Linear(-> 1).
LayerPtr ncf_small() {
  Rng rng(23);
  auto mf = std::make_unique<Sequential>();
  mf->add("embed", std::make_unique<PairEmbedding>(5, 4, 3, rng, 0.5f));
  mf->add("product", std::make_unique<HalvesProduct>());
  auto mlp = std::make_unique<Sequential>();
  mlp->add("embed", std::make_unique<PairEmbedding>(5, 4, 4, rng, 0.5f));
  mlp->add("0", std::make_unique<Linear>(8, 6, true, rng));
  mlp->add("relu0", std::make_unique<ReLU>());
  auto join = std::make_unique<Concat>();
  join->add("mf", std::move(mf));
  join->add("mlp", std::move(mlp));
  auto net = std::make_unique<Sequential>();
  net->add("", std::move(join));
  net->add("final", std::make_unique<Linear>(9, 1, true, rng));
  return net;
}

// (user, item) pairs as NCF takes them: row 0 users, row 1 items; repeated users and
// items, whose table rows must accumulate.
const std::vector<int32_t> kPairs = {0, 4, 2, 0, 3, 1, 1, 3, 0, 2};

std::vector<LayerCase> sequence_rows() {
  GradCheckOptions no_input;
  no_input.check_input = false;  // token ids have no gradient
  LayerCase embedding = grad_row(
      "Embedding",
      [] {
        Rng rng(21);
        return std::make_unique<Embedding>(7, 5, rng);
      },
      {}, no_input);
  // Repeated ids: their rows must accumulate.
  embedding.input = fixed_ids({3, 0, 6, 3, 3, 1}, {3, 2});
  LayerCase pair_embedding = grad_row(
      "PairEmbedding",
      [] {
        Rng rng(22);
        return std::make_unique<PairEmbedding>(5, 4, 3, rng, 0.5f);
      },
      {}, no_input);
  pair_embedding.input = fixed_ids(kPairs, {2, 5});
  LayerCase ncf = grad_row("NcfSmall", ncf_small, {}, no_input);
  ncf.input = fixed_ids(kPairs, {2, 5});
  return {embedding,
          pair_embedding,
          ncf,
          lstm_row("LstmOneLayerWithState", 3, 4, 1, 0.0f, 5, 2),
          lstm_row("LstmTwoLayersWithState", 5, 6, 2, 0.0f, 4, 3),
          lstm_row("LstmThreeLayersDropoutWithState", 4, 3, 3, 0.3f, 3, 2),
          lm_row("LstmLanguageModelUntied", false),
          lm_row("LstmLanguageModelTied", true)};
}

std::vector<LayerCase> gradient_check_rows() {
  std::vector<LayerCase> rows = convolution_rows();
  for (LayerCase& c : normalisation_rows()) rows.push_back(std::move(c));
  GradCheckOptions small_eps;
  small_eps.eps = 3e-3f;
  auto seeded = [](LayerCase c, uint64_t seed) {
    c.gradcheck_seed = seed;
    return c;
  };
  const std::vector<LayerCase> simple_rows = {
      grad_row("ReLU", simple<ReLU>(), {2, 3, 4, 4}),
      grad_row("Sigmoid", simple<Sigmoid>(), {2, 3, 4, 4}),
      grad_row("GELU", simple<GELU>(), {2, 3, 4, 4}),
      grad_row("MaxPool2d", simple<MaxPool2d>(3, 2, 1), {2, 2, 7, 7}),
      grad_row("AvgPool2d", simple<AvgPool2d>(2, 2), {2, 3, 6, 6}),
      grad_row("AvgPool2dPadded", simple<AvgPool2d>(3, 2, 1), {2, 2, 5, 5}),
      // Inception's pooling branches: 3x3, stride 1, padding 1 (the border averages count
      // the padded zeros, PyTorch's default).
      grad_row("AvgPool2d3x3Stride1Pad1", simple<AvgPool2d>(3, 1, 1), {2, 3, 5, 4}),
      grad_row("MaxPool2d3x3Stride1Pad1", simple<MaxPool2d>(3, 1, 1), {2, 3, 4, 5}),
      grad_row("GlobalAvgPool2d", simple<GlobalAvgPool2d>(), {3, 4, 5, 5}),
      grad_row("Linear", linear(8, 10, 7, true), {5, 10}),
      grad_row("Dropout",
               [] {
                 auto drop = std::make_unique<Dropout>(0.3f, 99);
                 drop->freeze_mask(true);
                 return drop;
               },
               {4, 50}),
      grad_row("Flatten", simple<Flatten>(), {2, 3, 2, 2}),
      grad_row("HalvesProduct", simple<HalvesProduct>(), {3, 8}),
      grad_row("ResidualAddAndSequential", residual_projection_block, {3, 3, 6, 6}, small_eps),
      grad_row("ResidualIdentity", residual_identity_block, {2, 3, 4, 4}),
      grad_row("ConcatInceptionBranches", concat_block, {2, 3, 5, 5}, small_eps),
      grad_row("SqueezeExcite", squeeze_excite_block, {2, 8, 3, 3}),
      seeded(grad_row("GlobalMaxPool2d", simple<GlobalMaxPool2d>(), {2, 3, 4, 5}), 13),
      seeded(grad_row("ShortcutPadA", simple<ShortcutPadA>(2, 4, 2), {2, 2, 5, 5}), 11),
      seeded(grad_row("ShortcutPadAStride1", simple<ShortcutPadA>(3, 5, 1), {2, 3, 4, 4}), 12)};
  rows.insert(rows.end(), simple_rows.begin(), simple_rows.end());
  for (LayerCase& c : sequence_rows()) rows.push_back(std::move(c));
  return rows;
}

const Tol kBnTol{1e-4, 1e-3};
const Tol kExact{0, 0};

std::vector<LayerCase> cuda_normalisation_rows() {
  LayerCase train = device_row(
      "BatchNorm2dTraining",
      [] {
        auto bn = std::make_unique<BatchNorm2d>(6);
        Rng rng(5);
        bn->weight().value.copy_from(random_tensor({6}, rng));
        bn->bias().value.copy_from(random_tensor({6}, rng));
        return bn;
      },
      {4, 6, 5, 5}, kBnTol);
  train.steps = 3;
  LayerCase eval = device_row(
      "BatchNorm2dEval",
      [] {
        auto bn = std::make_unique<BatchNorm2d>(4);
        Rng rng(6);
        bn->running_mean().copy_from(random_tensor({4}, rng));
        Tensor var = random_tensor({4}, rng, 0.5f);
        for (int i = 0; i < 4; ++i) var.f32()[i] += 1.0f;
        bn->running_var().copy_from(var);
        bn->weight().value.copy_from(random_tensor({4}, rng));
        return bn;
      },
      {3, 4, 6, 6}, kBnTol);
  eval.training = false;
  return {train, eval};
}

LayerPtr small_network() {
  Rng rng(12);
  auto net = std::make_unique<Sequential>();
  net->add("conv", std::make_unique<Conv2d>(3, 8, 3, 1, 1, false, rng));
  net->add("bn", std::make_unique<BatchNorm2d>(8));
  net->add("relu", std::make_unique<ReLU>());
  net->add("pool", std::make_unique<MaxPool2d>(2, 2, 0));
  net->add("gap", std::make_unique<GlobalAvgPool2d>());
  net->add("flat", std::make_unique<Flatten>());
  net->add("fc", std::make_unique<Linear>(8, 10, true, rng));
  return net;
}

// --precision bf16|fp16: both devices round the operands alike (core/kernels/half_math.h
// on both for bf16; IEEE round-to-nearest-even instructions for fp16) and accumulate in
// fp32; cuDNN also stores its output in 16 bits before widening, the CPU's oneDNN bf16
// kernel does not, so the bound is a few 16-bit ulps of the largest values.
std::vector<LayerCase> mixed_precision_rows() {
  const Tol bf16_tol{3e-2, 2e-2}, fp16_tol{1e-2, 1e-2};
  std::vector<LayerCase> rows;
  for (auto [p, tol] :
       {std::pair{Precision::BF16, bf16_tol}, std::pair{Precision::F16, fp16_tol}}) {
    LayerCase c = device_row("Conv2dInMixedPrecisionMatchesTheCpu",
                             conv(21, 4, 8, 3, 1, 1, true, p), {2, 4, 9, 9}, tol);
    c.label = precision_name(p);
    c.each_conv_algo = true;
    rows.push_back(c);
    LayerCase fc = device_row("LinearInMixedPrecisionMatchesTheCpu", linear(22, 33, 12, true, p),
                              {6, 33}, tol);
    fc.label = precision_name(p);
    rows.push_back(fc);
  }
  return rows;
}

// NCF in small on CUDA: gathers, products and joins exact; the linear layers' GEMMs not.
LayerCase ncf_device_row() {
  LayerCase c = device_row("NcfSmall", ncf_small, {});
  c.input = fixed_ids(kPairs, {2, 5});
  return c;
}

std::vector<LayerCase> cuda_rows() {
  LayerCase dropout_eval =
      device_row("DropoutEvalIsIdentity", simple<Dropout>(0.5f, uint64_t{5}), {3, 17}, kExact);
  dropout_eval.training = false;
  auto conv_row = [](std::string name, std::function<LayerPtr()> make, const Shape& in) {
    LayerCase c = device_row(std::move(name), std::move(make), in, kConvTol);
    c.each_conv_algo = true;
    return c;
  };
  std::vector<LayerCase> rows = {
      device_row("ReLU", simple<ReLU>(), {4, 3, 9, 9}, kExact),
      // CUDA's exp and erf differ from the host's by a few ulp.
      device_row("Sigmoid", simple<Sigmoid>(), {4, 3, 9, 9}),
      device_row("GELU", simple<GELU>(), {4, 3, 9, 9}),
      device_row("DropoutTrainingDropsSameElements", simple<Dropout>(0.3f, uint64_t{99}), {4, 1000},
                 kExact),
      dropout_eval,
      device_row("MaxPool2d3x3Stride2Pad1", simple<MaxPool2d>(3, 2, 1), {2, 3, 11, 11}, kExact),
      device_row("MaxPool2d2x2Stride2", simple<MaxPool2d>(2, 2, 0), {2, 4, 8, 8}, kExact),
      device_row("AvgPool2d3x3Stride2Pad1CountsPadding", simple<AvgPool2d>(3, 2, 1), {2, 3, 9, 9}),
      device_row("AvgPool2d2x2Stride2", simple<AvgPool2d>(2, 2, 0), {2, 4, 8, 8}),
      device_row("AvgPool2d3x3Stride1Pad1", simple<AvgPool2d>(3, 1, 1), {2, 3, 7, 6}),
      device_row("MaxPool2d3x3Stride1Pad1", simple<MaxPool2d>(3, 1, 1), {2, 3, 6, 7}, kExact),
      device_row("GlobalAvgPool2d", simple<GlobalAvgPool2d>(), {3, 5, 7, 7}),
      device_row("LinearWithBias", linear(3, 37, 19, true), {8, 37}),
      device_row("LinearNoBias", linear(4, 16, 5, false), {3, 16}),
      conv_row("Conv2d3x3Stride1PadBias", conv(7, 3, 8, 3, 1, 1, true), {2, 3, 10, 10}),
      conv_row("Conv2d3x3Stride2NoBias", conv(8, 4, 6, 3, 2, 1, false), {3, 4, 9, 9}),
      conv_row("Conv2d1x1Pointwise", conv(9, 8, 4, 1, 1, 0, true), {2, 8, 6, 6}),
      conv_row("Conv2d7x7Stride2Pad3", conv(10, 3, 4, 7, 2, 3, false), {2, 3, 16, 16}),
      conv_row("Conv2d1x7Pad0x3", conv_hw(11, 4, 6, {1, 7}, {1, 1}, {0, 3}, false), {2, 4, 9, 9}),
      conv_row("Conv2d7x1Pad3x0Bias", conv_hw(12, 4, 6, {7, 1}, {1, 1}, {3, 0}, true),
               {2, 4, 9, 9}),
      conv_row("Conv2d3x5Stride2x1Pad1x2", conv_hw(13, 3, 5, {3, 5}, {2, 1}, {1, 2}, true),
               {2, 3, 9, 8}),
      device_row("SmallNetworkTrainingStep", small_network, {4, 3, 8, 8}, kConvTol),
      device_row("ConcatInceptionBranches", concat_block, {3, 3, 7, 7}, kConvTol),
      device_row("SqueezeExcite", squeeze_excite_block, {3, 8, 5, 5}, kConvTol),
      device_row("HalvesProduct", simple<HalvesProduct>(), {5, 12}, kExact), ncf_device_row()};
  for (LayerCase& c : cuda_normalisation_rows()) rows.push_back(std::move(c));
  for (LayerCase& c : mixed_precision_rows()) rows.push_back(std::move(c));
  return rows;
}

}  // namespace

// --- running a case -----------------------------------------------------------------------

void set_conv_algo(Layer& layer, CpuConvAlgo algo) {
  layer.visit_layers([algo](Layer& l) {
    if (auto* c = dynamic_cast<Conv2d*>(&l)) c->set_cpu_algo(algo);
  });
}

std::vector<CpuConvAlgo> conv_algos_for(const LayerCase& c) {
  if (!c.each_conv_algo) return {CpuConvAlgo::Auto};
  std::vector<CpuConvAlgo> algos = {CpuConvAlgo::Im2col};
  if (cpu::onednn_built()) algos.push_back(CpuConvAlgo::OneDnn);
  return algos;
}

const char* conv_algo_name(CpuConvAlgo algo) {
  switch (algo) {
    case CpuConvAlgo::Im2col:
      return "im2col";
    case CpuConvAlgo::OneDnn:
      return "oneDNN";
    case CpuConvAlgo::Auto:
      break;
  }
  return "default convolution algorithm";
}

void expect_close(const Tensor& cpu, const Tensor& dev, Device device, const Tol& tol,
                  const std::string& what) {
  ASSERT_EQ(cpu.shape(), dev.shape()) << what;
  ASSERT_EQ(dev.device(), device) << what << " is on " << dev.device().str();
  if (cpu.dtype() != DType::F32) {
    const Tensor g = dev.to(Device::cpu());
    ASSERT_EQ(g.dtype(), cpu.dtype()) << what;
    if (cpu.dtype() == DType::I64) {
      for (int64_t i = 0; i < cpu.numel(); ++i)
        EXPECT_EQ(g.data<int64_t>()[i], cpu.data<int64_t>()[i]) << what << " element " << i;
    }
    return;
  }
  const std::vector<float> a = cpu.to_vector(), b = dev.to_vector();
  int reported = 0;
  for (size_t i = 0; i < a.size() && reported < 5; ++i) {
    if (std::abs(a[i] - b[i]) > tol.atol + tol.rtol * std::abs(a[i])) {
      ADD_FAILURE() << what << " element " << i << " of " << cpu.shape() << ": cpu " << a[i] << " "
                    << device.str() << " " << b[i];
      ++reported;
    }
  }
}

namespace {

// One step of compare_with_cpu: forward, backward, then every output, gradient and buffer.
struct Pair {
  Layer& cpu;
  Layer& dev;
  std::vector<Param*> cpu_params, dev_params;
  std::vector<Buffer*> cpu_bufs, dev_bufs;
};

void compare_step(const LayerCase& c, Pair& m, Device device, const Tol& tol, Rng& rng,
                  const std::map<Param*, int>& ready, int step) {
  const std::string at = m.cpu.describe() + " step " + std::to_string(step) + " ";
  Tensor x = c.input(rng);
  Tensor y_cpu = m.cpu.forward(x);
  Tensor y_dev = m.dev.forward(x.to(device));
  expect_close(y_cpu, y_dev, device, tol, at + "forward");
  Tensor dy = random_tensor(y_cpu.shape(), rng);
  Tensor dx_cpu = m.cpu.backward(dy);
  Tensor dx_dev = m.dev.backward(dy.to(device));
  ASSERT_EQ(dx_cpu.defined(), dx_dev.defined()) << at << "input gradient";
  if (dx_cpu.defined()) expect_close(dx_cpu, dx_dev, device, tol, at + "input gradient");
  for (size_t i = 0; i < m.cpu_params.size(); ++i) {
    expect_close(m.cpu_params[i]->grad, m.dev_params[i]->grad, device, tol,
                 at + m.cpu_params[i]->name + " gradient");
    const auto it = ready.find(m.dev_params[i]);
    EXPECT_EQ(it == ready.end() ? 0 : it->second, step + 1) << at << m.dev_params[i]->name;
  }
  for (size_t i = 0; i < m.cpu_bufs.size(); ++i)
    expect_close(m.cpu_bufs[i]->value, m.dev_bufs[i]->value, device, tol, at + m.cpu_bufs[i]->name);
}

}  // namespace

void compare_with_cpu(const LayerCase& c, Device device, const Tol& tol, CpuConvAlgo algo) {
  LayerPtr cpu = c.make(), dev = c.make();
  for (Layer* l : {cpu.get(), dev.get()}) {
    l->set_training(c.training);
    set_conv_algo(*l, algo);
  }
  dev->to(device);
  Pair m{*cpu,
         *dev,
         collect_params(*cpu),
         collect_params(*dev),
         collect_buffers(*cpu),
         collect_buffers(*dev)};
  ASSERT_EQ(m.cpu_params.size(), m.dev_params.size());
  Rng rng(42);
  for (size_t i = 0; i < m.cpu_params.size(); ++i) {
    Tensor g0 = random_tensor(m.cpu_params[i]->grad.shape(), rng, 0.5f);
    m.cpu_params[i]->grad.copy_from(g0);
    m.dev_params[i]->grad.copy_from(g0);  // host -> device
  }
  std::map<Param*, int> ready;
  for (Param* p : m.dev_params) p->on_grad_ready = [&ready](Param& q) { ++ready[&q]; };
  for (int step = 0; step < c.steps; ++step) compare_step(c, m, device, tol, rng, ready, step);
  for (Param* p : m.dev_params) p->on_grad_ready = nullptr;
}

void compare_softmax_with_cpu(Device device, const Tol& loss_tol, const Tol& grad_tol) {
  Rng rng(13);
  for (int64_t k : {3, 10, 100}) {
    Tensor logits = random_tensor({9, k}, rng, 4.0f);
    std::vector<int32_t> y(9);
    for (int i = 0; i < 9; ++i) y[i] = static_cast<int32_t>(rng.below(static_cast<uint32_t>(k)));
    Tensor labels = Tensor::from_vector_i32(y, {9});
    SoftmaxCrossEntropy cpu, dev;
    const float loss_cpu = cpu.forward(logits, labels);
    const float loss_dev = dev.forward(logits.to(device), labels.to(device));
    EXPECT_NEAR(loss_dev, loss_cpu, loss_tol.atol + loss_tol.rtol * std::abs(loss_cpu)) << k;
    EXPECT_EQ(dev.correct(), cpu.correct()) << k;
    expect_close(cpu.backward(0.5f), dev.backward(0.5f), device, grad_tol,
                 "softmax gradient k=" + std::to_string(k));
  }
}

namespace {

class CaseTest : public testing::Test {
 public:
  CaseTest(std::string name, std::function<bool(const LayerCase&)> applies,
           std::function<void(const LayerCase&)> run)
      : name_(std::move(name)), applies_(std::move(applies)), run_(std::move(run)) {}
  void TestBody() override {
    for (const LayerCase& c : layer_cases()) {
      if (c.name != name_ || !applies_(c)) continue;
      SCOPED_TRACE(c.label);
      run_(c);
    }
  }

 private:
  std::string name_;
  std::function<bool(const LayerCase&)> applies_;
  std::function<void(const LayerCase&)> run_;
};

}  // namespace

void register_case_tests(const char* suite, const std::function<bool(const LayerCase&)>& applies,
                         const std::function<void(const LayerCase&)>& run) {
  std::set<std::string> seen;
  for (const LayerCase& c : layer_cases()) {
    if (!applies(c) || !seen.insert(c.name).second) continue;
    testing::RegisterTest(suite, c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                          [name = c.name, applies, run]() -> testing::Test* {
                            return new CaseTest(name, applies, run);
                          });
  }
}

}  // namespace st::test
