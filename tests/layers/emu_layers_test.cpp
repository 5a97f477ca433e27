// Layers on the emulated device (docs/GPU.md "The emulated device"): EmuVsCpu.<case> for
// every row of the layer case table (tests/layers/layer_cases.h) compares forward, input
// gradients, parameter gradients and buffers with the CPU bit for bit, since the device
// runs the same kernels (convolution rows on every CPU algorithm, oneDNN included). The
// ctest entry emu_layers_delayed runs them again with every stream task delayed.
#include <algorithm>
#include <thread>

#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pooling.h"
#include "layers/relu.h"
#include "layers/sequential.h"
#include "tests/gradcheck.h"
#include "tests/layers/layer_cases.h"

namespace st::test {
namespace {

const Device kEmu = Device::emu(0);
const Tol kBitForBit{0, 0};

[[maybe_unused]] const bool kRegistered = [] {
  register_case_tests(
      "EmuVsCpu", [](const LayerCase&) { return true; },
      [](const LayerCase& c) {
        for (CpuConvAlgo algo : conv_algos_for(c)) {
          SCOPED_TRACE(conv_algo_name(algo));
          compare_with_cpu(c, kEmu, kBitForBit, algo);
        }
      });
  return true;
}();

TEST(EmuVsCpu, SoftmaxCrossEntropy) {
  compare_softmax_with_cpu(kEmu, kBitForBit, kBitForBit);
}

// The reducer's hook records an event on the host thread's stream when a bucket is ready,
// so every parameter must announce itself on the host thread, once, after its gradient
// was written, and in the order backward finishes them (the last layer's first).
TEST(EmuLayers, GradientsAreAnnouncedOnTheHostThreadAfterTheirWrites) {
  Rng rng(3);
  Sequential net;
  net.add("conv", std::make_unique<Conv2d>(2, 4, 3, 1, 1, true, rng));
  net.add("bn", std::make_unique<BatchNorm2d>(4));
  net.add("relu", std::make_unique<ReLU>());
  net.add("gap", std::make_unique<GlobalAvgPool2d>());
  net.add("flat", std::make_unique<Flatten>());
  net.add("fc", std::make_unique<Linear>(4, 3, true, rng));
  net.to(kEmu);
  const std::vector<Param*> params = collect_params(net);
  const std::thread::id host = std::this_thread::get_id();
  std::vector<std::string> order;
  std::vector<std::vector<float>> at_announcement;
  for (Param* p : params) {
    p->on_grad_ready = [&](Param& q) {
      EXPECT_EQ(std::this_thread::get_id(), host) << q.name;
      order.push_back(q.name);
      at_announcement.push_back(q.grad.to_vector());  // a copy through the stream
    };
  }
  Tensor y = net.forward(random_tensor({2, 2, 5, 5}, rng).to(kEmu));
  ASSERT_EQ(y.device(), kEmu);
  net.backward(random_tensor(y.shape(), rng).to(kEmu));
  const std::vector<std::string> want = {"fc.weight", "fc.bias",     "bn.weight",
                                         "bn.bias",   "conv.weight", "conv.bias"};
  ASSERT_EQ(order.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(order[i], want[i]) << i;
    const Param* p = params[std::find_if(params.begin(), params.end(),
                                         [&](Param* q) { return q->name == want[i]; }) -
                            params.begin()];
    EXPECT_EQ(at_announcement[i], p->grad.to_vector()) << want[i];
  }
  for (Param* p : params) p->on_grad_ready = nullptr;
}

// An error inside a layer's task reaches the host caller with the layer's message, and the
// parameters' hooks are the caller's again afterwards.
TEST(EmuLayers, ErrorsInsideTheTaskReachTheCaller) {
  Rng rng(4);
  Linear fc(4, 2, true, rng);
  fc.to(kEmu);
  try {
    fc.forward(Tensor::zeros({2, 5}, DType::F32, kEmu));
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Linear(4->2)"), std::string::npos) << e.what();
  }
  int announced = 0;
  for (Param* p : collect_params(fc)) p->on_grad_ready = [&](Param&) { ++announced; };
  fc.forward(Tensor::zeros({3, 4}, DType::F32, kEmu));
  EXPECT_THROW(fc.backward(Tensor::zeros({3, 7}, DType::F32, kEmu)), Error);
  EXPECT_EQ(announced, 0);
  fc.backward(Tensor::zeros({3, 2}, DType::F32, kEmu));
  EXPECT_EQ(announced, 2);
}

}  // namespace
}  // namespace st::test
