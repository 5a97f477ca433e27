// The LSTM and its language model beyond the layer case table (whose gradient checks cover
// Embedding, the LSTM with its carried state, and the language model): known values from
// PyTorch 1.13 (gate order and layout), truncated-BPTT state carrying, errors, the fused
// loss, and cuDNN's LSTM against the CPU one.
#include <cmath>
#include <memory>

#include "layers/embedding.h"
#include "layers/lstm.h"
#include "layers/softmax_cross_entropy.h"
#include "models/lstm_lm.h"
#include "tests/gradcheck.h"
#ifdef SPARSETRAIN_WITH_CUDA
#include "tests/cuda/cuda_test_util.h"
#endif

namespace st::test {
namespace {

Tensor ids_tensor(const std::vector<int32_t>& ids, const Shape& shape) {
  return Tensor::from_vector_i32(ids, shape);
}

// nn.LSTM(3, 4, 2) with parameters 0.3 sin(0.7 k + p) (k the element, p the parameter's
// position), x = cos(0.5 i), h0 = 0.1 sin(i), c0 = 0.2 cos(i): values from PyTorch 1.13.
TEST(Lstm, MatchesPyTorchKnownValues) {
  const int64_t L = 2, I = 3, H = 4, T = 3, B = 2;
  Rng rng(0);
  Lstm lstm(I, H, L, 0.0f, rng);
  int pi = 0;
  lstm.visit_params("", [&](const std::string&, Param& p) {
    float* v = p.value.f32();
    for (int64_t k = 0; k < p.value.numel(); ++k) v[k] = 0.3f * std::sin(0.7f * k + pi);
    ++pi;
  });
  std::vector<float> x(T * B * I), h0(L * B * H), c0(L * B * H);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.5f * i);
  for (size_t i = 0; i < h0.size(); ++i) h0[i] = 0.1f * std::sin(static_cast<float>(i));
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = 0.2f * std::cos(static_cast<float>(i));
  lstm.set_state(Tensor::from_vector(h0, {L, B, H}), Tensor::from_vector(c0, {L, B, H}));
  Tensor xt = Tensor::from_vector(x, {T, B, I});
  Tensor y = lstm.forward(xt);
  const std::vector<float> want_y = {
      -0.0419724, -0.0315634, 0.0844585, 0.1091418, -0.0266184, 0.0751269, 0.1155402, 0.0777678,
      -0.0979253, 0.0325814,  0.128917,  0.1459253, -0.0776369, 0.0601197, 0.1514979, 0.1283896,
      -0.1257061, 0.0579826,  0.1445582, 0.161217,  -0.1141156, 0.0622702, 0.1622963, 0.1459107};
  const std::vector<float> want_h = {
      0.0151074,  0.177288,  -0.0206006, -0.3027519, 0.117912,   0.0857653, 0.0158629, -0.0981428,
      -0.1257061, 0.0579826, 0.1445582,  0.161217,   -0.1141156, 0.0622702, 0.1622963, 0.1459107};
  const std::vector<float> want_c = {
      0.030829,   0.4331017, -0.0642203, -0.5065597, 0.3777474,  0.2060202, 0.0323039, -0.2037879,
      -0.2182742, 0.1113935, 0.358375,   0.452866,   -0.1922946, 0.123572,  0.3925543, 0.4169512};
  auto expect_values = [](const Tensor& t, const std::vector<float>& want, const char* what) {
    std::vector<float> got = t.to_vector();
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6) << what << " " << i;
  };
  expect_values(y, want_y, "y");
  expect_values(lstm.final_h(), want_h, "h_T");
  expect_values(lstm.final_c(), want_c, "c_T");
  // d(sum y)/dx and the first elements of d(sum y)/dW_hh_l0.
  lstm.visit_params("", [](const std::string&, Param& p) { p.grad.zero(); });
  Tensor dx = lstm.backward(Tensor::full({T, B, H}, 1.0f));
  expect_values(dx,
                {-0.0016365, 0.0012198, 0.0035024, 6.55e-05, 0.0066131, 0.0100504, 0.0019252,
                 0.004809, 0.005431, 3.08e-05, 0.0032644, 0.0049627, -0.0013656, -0.0007353,
                 0.0002408, 0.0002556, 0.0025732, 0.0036807},
                "dx");
  std::vector<float> dwhh = lstm.weight_hh(0).grad.to_vector();
  dwhh.resize(8);
  expect_values(
      Tensor::from_vector(dwhh, {8}),
      {-0.0002052, 0.0002996, -1.58e-05, -0.0011947, 0.0003702, 0.0004008, 0.0002628, -3.7e-05},
      "dW_hh_l0");
}

// Truncated BPTT: two windows with the state carried equal one window over both.
TEST(Lstm, CarriedStateEqualsOneLongWindow) {
  const int64_t I = 4, H = 5, B = 3;
  Rng rng(3), data(4);
  Lstm lstm(I, H, 2, 0.0f, rng);
  Tensor x = random_tensor({6, B, I}, data);
  Tensor full = lstm.forward(x).clone();
  Tensor full_h = lstm.final_h().clone();
  lstm.reset_state();
  Tensor a = lstm.forward(x.slice_flat(0, {3, B, I}).clone()).clone();
  lstm.set_state(lstm.final_h(), lstm.final_c());
  Tensor b = lstm.forward(x.slice_flat(3 * B * I, {3, B, I}).clone()).clone();
  std::vector<float> f = full.to_vector(), va = a.to_vector(), vb = b.to_vector();
  va.insert(va.end(), vb.begin(), vb.end());
  ASSERT_EQ(f.size(), va.size());
  for (size_t i = 0; i < f.size(); ++i) EXPECT_NEAR(f[i], va[i], 1e-6) << i;
  std::vector<float> h1 = full_h.to_vector(), h2 = lstm.final_h().to_vector();
  for (size_t i = 0; i < h1.size(); ++i) EXPECT_NEAR(h1[i], h2[i], 1e-6) << i;
  // A batch-size change without reset_state() is an error naming both sizes.
  try {
    lstm.forward(random_tensor({2, B + 1, I}, data));
    FAIL() << "a state for batch " << B << " must not be used with batch " << B + 1;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reset_state"), std::string::npos) << e.what();
  }
}

TEST(Lstm, ShapeErrorsNameTheLayer) {
  Rng rng(5);
  Lstm lstm(4, 3, 1, 0.0f, rng);
  try {
    lstm.forward(Tensor::zeros({2, 3, 5}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LSTM(4->3"), std::string::npos) << e.what();
  }
  Embedding emb(5, 2, rng);
  try {
    emb.forward(ids_tensor({1, 5}, {2}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 5"), std::string::npos) << e.what();
  }
}

// The language model's fused loss agrees with the generic SoftmaxCrossEntropy.
TEST(LmCrossEntropy, MatchesSoftmaxCrossEntropy) {
  Rng rng(51);
  Tensor logits = random_tensor({13, 37}, rng, 8.0f);
  std::vector<int32_t> y(13);
  for (int i = 0; i < 13; ++i) y[i] = (i * 7) % 37;
  Tensor labels = Tensor::from_vector_i32(y, {13});
  SoftmaxCrossEntropy ref;
  const float want = ref.forward(logits, labels);
  const std::vector<float> want_grad = ref.backward(0.5f).to_vector();
  LmCrossEntropy ce;
  Tensor z = logits.clone();
  EXPECT_NEAR(ce.forward(z, labels), want, 1e-5 * std::abs(want));
  const std::vector<float> grad = ce.backward(0.5f).to_vector();
  for (size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(grad[i], want_grad[i], 1e-6) << i;
  EXPECT_THROW(ce.forward(z, Tensor::from_vector_i32(std::vector<int32_t>(13, 37), {13})), Error);
}

#ifdef SPARSETRAIN_WITH_CUDA
// cuDNN's LSTM against the CPU one: outputs, final state, dx, dL/dh0, dL/dc0 and the
// accumulated parameter gradients, over two steps with the state carried and the same
// Philox dropout masks between layers. Skips without a device.
TEST(CudaVsCpu, LstmCudnnMatchesCpu) {
  ST_REQUIRE_CUDA_DEVICE();
  const Device gpu = Device::cuda(0);
  const int64_t T = 5, B = 3, I = 4, H = 6, L = 2;
  Rng r1(61), r2(61), data(62);
  Lstm cpu(I, H, L, 0.3f, r1, 9), dev(I, H, L, 0.3f, r2, 9);
  dev.to(gpu);
  auto close = [](const Tensor& a, const Tensor& b, const std::string& what) {
    const std::vector<float> x = a.to_vector(), y = b.to_vector();
    ASSERT_EQ(x.size(), y.size()) << what;
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(x[i], y[i], 1e-4 + 1e-3 * std::abs(x[i])) << what << " " << i;
  };
  Tensor h0 = random_tensor({L, B, H}, data, 0.5f), c0 = random_tensor({L, B, H}, data, 0.5f);
  cpu.set_state(h0, c0);
  dev.set_state(h0.to(gpu), c0.to(gpu));
  for (int step = 0; step < 2; ++step) {
    const std::string at = "step " + std::to_string(step) + " ";
    Tensor x = random_tensor({T, B, I}, data), dy = random_tensor({T, B, H}, data);
    Tensor dh = random_tensor({L, B, H}, data), dc = random_tensor({L, B, H}, data);
    close(cpu.forward(x), dev.forward(x.to(gpu)), at + "y");
    close(cpu.final_h(), dev.final_h(), at + "h_T");
    close(cpu.final_c(), dev.final_c(), at + "c_T");
    cpu.set_final_state_grad(dh, dc);
    dev.set_final_state_grad(dh.to(gpu), dc.to(gpu));
    close(cpu.backward(dy), dev.backward(dy.to(gpu)), at + "dx");
    close(cpu.initial_h_grad(), dev.initial_h_grad(), at + "dh0");
    close(cpu.initial_c_grad(), dev.initial_c_grad(), at + "dc0");
    std::vector<Param*> pc = collect_params(cpu), pd = collect_params(dev);
    for (size_t i = 0; i < pc.size(); ++i) close(pc[i]->grad, pd[i]->grad, at + pc[i]->name);
    cpu.set_state(cpu.final_h(), cpu.final_c());
    dev.set_state(dev.final_h(), dev.final_c());
  }
}
#endif

}  // namespace
}  // namespace st::test
