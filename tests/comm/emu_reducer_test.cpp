// The bucketed reducer on emulated-device gradients, as a GPU training step drives it:
// backward's "kernels" write each parameter's gradient on the main thread's stream and
// return at once, the reducer records an event there when a bucket is complete, the
// exchange runs on the communication thread's own stream over the emulated collective,
// and the averaged gradients are read back on the main thread. Gradients are small
// integers, so every wire format's average is exact and the expectation is a formula,
// not another run. Under SPARSETRAIN_EMU_DELAY_US (a ctest entry) a missing event wait or
// fence leaves stale values and the comparison fails.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "core/emu/launch.h"
#include "core/emu/stream.h"
#include "layers/flat_params.h"
#include "layers/layer.h"

namespace st::test {

extern Communicator* g_emu_world;

namespace {

// Three parameters of different sizes; backward writes rank- and step-dependent integers
// into each gradient as queued device work, then announces it ready.
class ThreeParams : public Layer {
 public:
  ThreeParams() {
    params_ = {&add_param("p0", Shape{1001}, ParamKind::Weight),
               &add_param("p1", Shape{2001}, ParamKind::Weight),
               &add_param("p2", Shape{3001}, ParamKind::Weight)};
  }
  std::string describe() const override { return "ThreeParams"; }
  int rank = 0, step = 0;

  static float value(int param, int64_t i, int rank, int step) {
    return static_cast<float>((i * 7 + param * 3 + step) % 13 + 2 * rank);
  }

 protected:
  Tensor forward_cpu(const Tensor& x) override { return x; }
  Tensor backward_cpu(const Tensor& dy) override {
    for (int k = 2; k >= 0; --k) {
      Param* p = params_[k];
      emu::launch(p->grad.device().index, [g = p->grad, k, r = rank, s = step] {
        float* d = g.as_host_memory().f32();
        for (int64_t i = 0; i < g.numel(); ++i) d[i] += value(k, i, r, s);
      });
      p->mark_grad_ready();
    }
    return dy;
  }

 private:
  std::vector<Param*> params_;
};

// Each rank works on its node-local device; a launcher that shows each task one device
// (SPARSETRAIN_EMU_DEVICES=1, the emulated CUDA_VISIBLE_DEVICES of SLURM's
// --gpus-per-task=1) puts every rank on emu:0.
TEST(EmuPlacement, EachRankOnItsLocalDeviceOrTheOneItIsShown) {
  const char* shown = std::getenv("SPARSETRAIN_EMU_DEVICES");
  const int expected =
      shown != nullptr && std::string(shown) == "1" ? 0 : g_emu_world->placement().local_rank;
  EXPECT_EQ(process_device(), Device::emu(expected));
}

class EmuReducer : public ::testing::TestWithParam<Precision> {};

TEST_P(EmuReducer, AveragesEveryBucketExactly) {
  Communicator& c = *g_emu_world;
  const Device emu = process_device();
  ASSERT_TRUE(emu.is_emu());
  ThreeParams layer;
  FlatParams flat(layer, emu);
  ReducerOptions ro;
  ro.first_bucket_mb = 0.005;  // about one parameter per bucket
  ro.bucket_cap_mb = 0.005;
  Reducer reducer(flat, c, std::make_shared<AllreduceHook>(GetParam()), ro);
  ASSERT_GE(reducer.buckets().size(), 2u);
  const int p = c.size();
  for (int step = 0; step < 3; ++step) {
    layer.rank = c.rank();
    layer.step = step;
    flat.zero_grads();
    reducer.begin_backward();
    layer.backward(Tensor::zeros({1}));
    reducer.finalize();
    const std::vector<Param*>& params = flat.params();
    for (size_t k = 0; k < params.size(); ++k) {
      const std::vector<float> got = params[k]->grad.to(Device::cpu()).to_vector();
      const int index = std::stoi(params[k]->name.substr(1));
      int64_t wrong = 0;
      for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
        float sum = 0;
        for (int r = 0; r < p; ++r) sum += ThreeParams::value(index, i, r, step);
        wrong += got[static_cast<size_t>(i)] != sum / static_cast<float>(p);
      }
      EXPECT_EQ(wrong, 0) << params[k]->name << " step " << step << " of " << got.size();
    }
  }
}

// Shaped like a GPU convolution's backward: the dW kernel, the announcement, then the dx
// kernel, which reads W; the host queues all three and returns at once. Each kernel takes
// a while, so the dx kernel runs long after the host has called finalize().
class ReadsWeightAfterAnnouncing : public Layer {
 public:
  ReadsWeightAfterAnnouncing() : w_(add_param("w", Shape{4096}, ParamKind::Weight)) {}
  std::string describe() const override { return "ReadsWeightAfterAnnouncing"; }
  Tensor backward(const Tensor&) override {
    const Device d = w_.grad.device();
    emu::launch(d.index, [g = w_.grad] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      g.as_host_memory().copy_from(Tensor::full(g.shape(), 1.0f));
    });
    w_.mark_grad_ready();
    Tensor dx = Tensor::empty({1}, DType::F32, d);
    emu::launch(d.index, [w = w_.value, dx] {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      dx.as_host_memory().f32()[0] = w.as_host_memory().f32()[0];
    });
    return dx;
  }

 protected:
  Tensor forward_cpu(const Tensor& x) override { return x; }
  Tensor backward_cpu(const Tensor& dy) override { return dy; }

 private:
  Param& w_;
};

// Forward overlap updates a bucket on the communication thread once its exchange is done
// and backward has ended. Ended means the compute stream has run backward's kernels, not
// that the host has queued them: the update must not write W before the dx kernel read it.
TEST(EmuForwardOverlap, AnUpdateWaitsForTheKernelsQueuedAfterTheAnnouncement) {
  Communicator& c = *g_emu_world;
  const Device emu = process_device();
  ReadsWeightAfterAnnouncing layer;
  FlatParams flat(layer, emu);
  flat.values().copy_from(Tensor::full(flat.values().shape(), 5.0f));
  Reducer reducer(flat, c, std::make_shared<AllreduceHook>(Precision::F32), ReducerOptions{});
  reducer.set_bucket_update([&flat](const Bucket&) {
    return std::function<void()>([v = flat.values()] {
      emu::run_in_stream_order(
          v.device().index, "an update",
          [v] { v.as_host_memory().copy_from(Tensor::full(v.shape(), 7.0f)); }, true);
    });
  });
  flat.zero_grads();
  reducer.begin_backward();
  const Tensor dx = layer.backward(Tensor::zeros({1}, DType::F32, emu));
  reducer.finalize();
  reducer.drain();
  EXPECT_EQ(dx.to(Device::cpu()).to_vector()[0], 5.0f)
      << "the update wrote W while backward's dx kernel was still to read it";
  EXPECT_EQ(flat.values().to(Device::cpu()).to_vector()[0], 7.0f) << "the update ran";
}

INSTANTIATE_TEST_SUITE_P(Wire, EmuReducer,
                         ::testing::Values(Precision::F32, Precision::BF16, Precision::F16),
                         [](const auto& info) { return std::string(precision_name(info.param)); });

}  // namespace
}  // namespace st::test
