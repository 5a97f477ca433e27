// Fault injection into the bucket pipeline, on 1 and 2 ranks: an exchange that throws on
// one bucket, and an exception thrown on the training thread in the middle of backward.
// Either way the communication thread still has buckets of the failed iteration queued
// or running; the Reducer must be torn down only after they have finished (they point
// into its buckets, its hook and the flat buffer), also while the exception unwinds.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/sequential.h"
#include "tests/comm/mpi_test_run.h"

namespace st::test {
namespace {

// Averages like the dense hook, slowly, counting the exchanges that have finished;
// bucket `fail_bucket` throws after its allreduce (so the ranks stay aligned).
class SlowHook : public BucketHook {
 public:
  SlowHook(std::atomic<int>& finished, int fail_bucket) : finished_(finished), fail_(fail_bucket) {}
  std::string name() const override { return "slow"; }
  void exchange(const Bucket& bucket, Tensor& grads, Communicator& comm, int64_t) override {
    comm.allreduce(grads);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    grads.fill(1.0f);  // writes into the flat buffer: must still exist
    ++finished_;
    if (bucket.id == fail_)
      throw Error("injected exchange failure in bucket " + std::to_string(fail_));
  }

 private:
  std::atomic<int>& finished_;
  int fail_;
};

// Throws from backward once `armed`: the layers after it (earlier in the net) never run.
class ThrowingLayer : public Layer {
 public:
  explicit ThrowingLayer(bool& armed) : armed_(armed) {}
  std::string describe() const override { return "Throwing"; }

 protected:
  Tensor forward_cpu(const Tensor& x) override { return x; }
  Tensor backward_cpu(const Tensor& dy) override {
    if (armed_) throw Error("injected failure mid-backward");
    return dy;
  }

 private:
  bool& armed_;
};

std::unique_ptr<Sequential> make_net(bool& armed) {
  Rng rng(3);
  auto net = std::make_unique<Sequential>();
  net->add("fc1", std::make_unique<Linear>(16, 64, true, rng));
  net->add("relu1", std::make_unique<ReLU>());
  net->add("fc2", std::make_unique<Linear>(64, 64, true, rng));
  net->add("boom", std::make_unique<ThrowingLayer>(armed));
  net->add("fc3", std::make_unique<Linear>(64, 64, true, rng));
  net->add("relu3", std::make_unique<ReLU>());
  net->add("fc4", std::make_unique<Linear>(64, 8, true, rng));
  return net;
}

ReducerOptions small_buckets() {
  ReducerOptions o;
  o.first_bucket_mb = 0.001;  // one parameter per bucket
  o.bucket_cap_mb = 0.001;
  return o;
}

TEST(ReducerTeardown, ExchangeErrorWaitsForEveryBucketBeforeRethrowing) {
  bool armed = false;
  auto net = make_net(armed);
  std::atomic<int> finished{0};
  int launched = 0;
  {
    FlatParams flat(*net, Device::cpu());
    Reducer reducer(flat, world(), std::make_shared<SlowHook>(finished, 0), small_buckets());
    launched = static_cast<int>(reducer.buckets().size());
    ASSERT_GE(launched, 4);
    Tensor x = Tensor::full({2, 16}, 0.5f);
    net->forward(x);
    reducer.begin_backward();
    net->backward(Tensor::full({2, 8}, 0.1f));
    try {
      reducer.finalize();
      FAIL() << "the injected exchange error must reach finalize()";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("injected exchange failure in bucket 0"),
                std::string::npos);
      EXPECT_EQ(finished.load(), launched) << "finalize() rethrew while buckets were in flight";
    }
  }
  EXPECT_EQ(finished.load(), launched);
}

TEST(ReducerTeardown, ExceptionMidBackwardWaitsForLaunchedBuckets) {
  bool armed = false;
  auto net = make_net(armed);
  std::atomic<int> finished{0};
  int finished_when_destroyed = -1, expected = 0;
  try {
    FlatParams flat(*net, Device::cpu());
    // Destroyed after the reducer (declared first), it records what had finished when the
    // reducer's destructor returned.
    struct Probe {
      std::atomic<int>& finished;
      int& out;
      ~Probe() { out = finished.load(); }
    } probe{finished, finished_when_destroyed};
    Reducer reducer(flat, world(), std::make_shared<SlowHook>(finished, -1), small_buckets());
    // The buckets that fill before the throw: those holding only fc3's and fc4's tensors.
    for (const Bucket& b : reducer.buckets()) {
      bool late = true;
      for (const Param* p : b.params)
        late = late && (p->name.rfind("fc3", 0) == 0 || p->name.rfind("fc4", 0) == 0);
      expected += late;
    }
    ASSERT_GE(expected, 2);
    Tensor x = Tensor::full({2, 16}, 0.5f);
    net->forward(x);
    armed = true;
    reducer.begin_backward();
    net->backward(Tensor::full({2, 8}, 0.1f));  // fc4 and fc3 become ready, then the throw
    FAIL() << "backward must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("injected failure mid-backward"), std::string::npos);
  }
  EXPECT_EQ(finished_when_destroyed, expected)
      << "the reducer went while its buckets were in flight";
  world().wait_idle();
  EXPECT_EQ(finished.load(), expected);
}

}  // namespace
}  // namespace st::test
