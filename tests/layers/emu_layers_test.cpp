// Layers on the emulated device (docs/GPU.md "The emulated device"): EmuVsCpu.<case> for
// every row of the layer case table (tests/layers/layer_cases.h) compares forward, input
// gradients, parameter gradients and buffers with the CPU bit for bit, since the device
// runs the same kernels (convolution rows on every CPU algorithm, oneDNN included). The
// ctest entry emu_layers_delayed runs them again with every stream task delayed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "core/emu/stream.h"
#include "core/layout.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"
#include "layers/sequential.h"
#include "models/registry.h"
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

// The host launches a ResNet's forward and backward and returns while the stream has run
// none of it (a task holds the stream until the host is back): every layer inferred its
// output on the host. Only the first forward of an input shape waits, while oneDNN builds
// the convolutions' primitives. The results then equal the CPU's bit for bit.
TEST(EmuLayers, AResNetStepIsQueuedWithoutAWait) {
  Rng init(5);
  LayerPtr cpu_net = make_model("resnet20", 10, 3, init, 16);
  Rng init_again(5);
  LayerPtr emu_net = make_model("resnet20", 10, 3, init_again, 16);
  emu_net->to(kEmu);
  Rng data(6);
  const Tensor x = random_tensor({2, 3, 16, 16}, data), dy = random_tensor({2, 10}, data);
  const Tensor x_emu = x.to(kEmu), dy_emu = dy.to(kEmu);  // copies wait for the stream
  emu_net->forward(x_emu);                                // builds the primitives for this shape
  emu::Stream& stream = emu::current_stream(0);
  std::atomic<bool> host_back{false}, opened{false};
  stream.enqueue([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!host_back.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    opened = true;
  });
  const Tensor y = emu_net->forward(x_emu);
  const Tensor dx = emu_net->backward(dy_emu);
  const bool waited = opened.load();
  host_back = true;
  EXPECT_FALSE(waited) << "a layer waited for the stream: its output was not inferred on the host";
  const Tensor want_y = cpu_net->forward(x);
  const Tensor want_dx = cpu_net->backward(dy);
  EXPECT_EQ(y.to(Device::cpu()).to_vector(), want_y.to_vector());
  EXPECT_EQ(to_plain(dx.to(Device::cpu())).to_vector(), to_plain(want_dx).to_vector());
  const std::vector<Param*> a = collect_params(*cpu_net), b = collect_params(*emu_net);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i]->grad.to_vector(), b[i]->grad.to(Device::cpu()).to_vector()) << a[i]->name;
}

}  // namespace
}  // namespace st::test
