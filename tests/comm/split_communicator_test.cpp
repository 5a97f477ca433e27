// The communicator a device run uses: host tensors (the control plane every step also
// agrees on) reach the host backend, never the device backend, which -- like NCCL --
// refuses host memory; each plane is entered by one thread at a time; and --comm auto
// resolves to the device backend when the tensors live on an accelerator. (Device
// tensors cannot be made in a CPU build; the device plane is exercised by the GPU tests.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "comm/local_communicator.h"
#include "comm/split_communicator.h"
#include "core/error.h"

namespace st::test {
namespace {

// NCCL's rule on the CPU: any host tensor is refused, naming the call.
class DeviceOnly : public Communicator {
 public:
  std::string backend() const override { return "device-only"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce(Tensor& t, ReduceOp) override { refuse("allreduce", t); }
  void allgather(const Tensor& in, Tensor&) override { refuse("allgather", in); }
  void allgatherv(const Tensor& in, Tensor&, const std::vector<int64_t>&) override {
    refuse("allgatherv", in);
  }
  void broadcast(Tensor& t, int) override { refuse("broadcast", t); }
  void barrier() override { ST_THROW("device-only: barrier"); }
  std::vector<std::string> gather_bytes(const std::string&, int) override {
    ST_THROW("device-only: gather_bytes");
  }

 private:
  static void refuse(const char* op, const Tensor& t) {
    ST_CHECK(!t.device().is_cpu(), "device-only ", op, ": ", t.str(), " is host memory");
  }
};

// A host backend that counts its calls and can hold a call open for a while.
class SlowHost : public LocalCommunicator {
 public:
  void allreduce(Tensor& t, ReduceOp op) override {
    ++calls;
    std::this_thread::sleep_for(hold);
    LocalCommunicator::allreduce(t, op);
  }
  void allgather(const Tensor& in, Tensor& out) override {
    ++calls;
    LocalCommunicator::allgather(in, out);
  }
  std::atomic<int> calls{0};
  std::chrono::milliseconds hold{0};
};

// What the training loop, the reducer's plan check and the loss scaler send every run.
void control_plane(Communicator& c) {
  c.check_same_on_all_ranks(12345, "the gradient bucket plan");
  EXPECT_DOUBLE_EQ(c.allreduce_scalar(2.5), 2.5);
  Tensor flags = Tensor::zeros({2}, DType::I32);
  c.allreduce(flags, ReduceOp::Max);
  Tensor blob = Tensor::zeros({4}, DType::I32);
  c.broadcast(blob, 0);
  c.barrier();
  EXPECT_EQ(c.gather_bytes("abc", 0).size(), 1u);
}

TEST(SplitCommunicator, TheControlPlaneNeverReachesTheDeviceBackend) {
  // Handed the device backend alone (as the NCCL communicator was), the first host tensor
  // stops the run: the failure every multi-GPU start met.
  DeviceOnly alone;
  EXPECT_THROW(control_plane(alone), Error);

  auto host = std::make_unique<SlowHost>();
  SlowHost* seen = host.get();
  SplitCommunicator split(std::move(host), std::make_unique<DeviceOnly>());
  EXPECT_EQ(split.backend(), "device-only");
  control_plane(split);
  EXPECT_GE(seen->calls.load(), 3);
}

TEST(SplitCommunicator, TwoThreadsInOnePlaneAtOnceAreRefused) {
  auto host = std::make_unique<SlowHost>();
  host->hold = std::chrono::milliseconds(300);
  SplitCommunicator split(std::move(host), std::make_unique<DeviceOnly>());
  std::atomic<int> refused{0};
  auto call = [&] {
    Tensor t = Tensor::zeros({1});
    try {
      split.allreduce(t, ReduceOp::Sum);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("entered by two threads at once"), std::string::npos)
          << e.what();
      ++refused;
    }
  };
  std::thread first(call);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  call();  // while the first thread is still inside
  first.join();
  EXPECT_EQ(refused.load(), 1);
  // One after the other is fine (the main thread at start, the worker in the steps).
  Tensor t = Tensor::zeros({1});
  EXPECT_NO_THROW(split.allreduce(t, ReduceOp::Sum));
}

TEST(ResolveBackend, AutoFollowsTheDeviceUnderALauncher) {
  EXPECT_EQ(resolve_backend("auto", false, Device::cpu()), "local");
  EXPECT_EQ(resolve_backend("auto", false, Device::cuda(0)), "local");
  EXPECT_EQ(resolve_backend("auto", true, Device::cpu()), "mpi");
  // Under mpirun with GPU tensors MPI cannot carry the gradients: NCCL.
  EXPECT_EQ(resolve_backend("auto", true, Device::cuda(1)), "nccl");
  EXPECT_EQ(resolve_backend("nccl", true, Device::cuda(0)), "nccl");
  EXPECT_EQ(resolve_backend("local", true, Device::cuda(0)), "local");
}

TEST(ResolveBackend, TheEmulatedDeviceTakesItsOwnCollective) {
  EXPECT_EQ(resolve_backend("auto", true, Device::emu(1)), "emu");
  EXPECT_EQ(resolve_backend("auto", false, Device::emu(0)), "local");
  EXPECT_EQ(resolve_backend("emu", true, Device::emu(0)), "emu");
  for (const auto& [backend, device] : {std::pair{"mpi", Device::emu(0)},
                                        {"nccl", Device::emu(0)},
                                        {"emu", Device::cpu()},
                                        {"emu", Device::cuda(0)}}) {
    try {
      resolve_backend(backend, true, device);
      FAIL() << backend << " with " << device.str() << " must be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--comm"), std::string::npos) << e.what();
    }
  }
}

// Emulated tensors go to the device plane, which refuses host memory like NCCL.
TEST(SplitCommunicator, EmulatedTensorsReachTheDevicePlane) {
  SplitCommunicator split(std::make_unique<LocalCommunicator>(), std::make_unique<DeviceOnly>());
  Tensor t = Tensor::zeros({3}, DType::F32, Device::emu(0));
  EXPECT_NO_THROW(split.allreduce(t, ReduceOp::Sum));
  Tensor host = Tensor::zeros({3});
  EXPECT_NO_THROW(split.allreduce(host, ReduceOp::Sum));
}

TEST(ResolveBackend, CombinationsThatCannotWorkNameTheFlag) {
  for (const auto& [backend, device] :
       {std::pair{"mpi", Device::cuda(0)}, {"nccl", Device::cpu()}, {"gloo", Device::cpu()}}) {
    try {
      resolve_backend(backend, true, device);
      FAIL() << backend << " with " << device.str() << " must be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--comm"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace st::test
