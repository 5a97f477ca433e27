// Every sparsifier through SparsifyHook twice on the same gradients: once on CPU buckets
// (bulk::CpuOps, host tensors over MPI) and once on emulated device buckets (bulk::EmuOps,
// the emulated collective), on 1, 2 and 4 ranks, each rank on its local emulated device.
// As in a training step, the device exchange runs on the communicator's worker thread
// (its own stream) and the results are read back on the main thread (another stream), so
// work the exchange leaves queued when it returns shows up as a wrong update. The first
// step is a dense warm-up. The averaged update, the residual and the counts must agree: bit
// for bit for the methods the CUDA twin of this test treats as exact, otherwise at all but
// a few boundary positions. SPARSETRAIN_EMU_DELAY_US widens every race (ctest runs one
// setting with it).
//
// The emulated collective itself: it waits for the caller's stream, and refuses host
// tensors and a thread bound to another device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "core/emu/runtime.h"
#include "core/emu/stream.h"
#include "core/error.h"
#include "sparsify/registry.h"
#include "sparsify/sparsify_hook.h"
#include "tests/comm/mpi_test_run.h"
#include "tests/sparsify/device_agreement.h"
#include "tests/sparsify/heavy_tailed.h"

namespace st::test {

namespace {

class EmuHook : public ::testing::TestWithParam<std::string> {};

TEST_P(EmuHook, SameExchangeAsCpu) {
  const std::string method = GetParam();
  Communicator& c = world();
  const Device emu = process_device();
  ASSERT_TRUE(emu.is_emu());
  SparsifierOptions opt;
  opt.density = 0.01;
  opt.seed = 17;
  if (method == "vgc") opt.params = {{"batch", "1"}};
  const int64_t warmup = 1;
  SparsifyHook on_cpu(make_sparsifier(method, opt), opt, warmup),
      on_emu(make_sparsifier(method, opt), opt, warmup);
  const std::vector<int64_t> sizes = {6000, 2500};
  for (int64_t t = 0; t < 6; ++t)
    for (size_t b = 0; b < sizes.size(); ++b) {
      SCOPED_TRACE(method + " step " + std::to_string(t) + " bucket " + std::to_string(b));
      const int64_t n = sizes[b];
      Bucket bucket;
      bucket.id = static_cast<int>(b);
      bucket.numel = n;
      const Tensor grad = gradient(n, c.rank(), t, bucket.id);
      Tensor host = grad.clone(), device = grad.to(emu);
      on_cpu.exchange(bucket, host, c, t);
      // The reducer's way: the exchange runs on the communication thread.
      c.submit([&] { on_emu.exchange(bucket, device, c, t); }).wait();
      const std::vector<float> u_cpu = host.to_vector(), u_emu = device.to_vector();
      const std::vector<float> r_cpu = residual_of(on_cpu, bucket.id, n),
                               r_emu = residual_of(on_emu, bucket.id, n);
      const std::vector<SparsifyStats> s_cpu = on_cpu.take_stats(), s_emu = on_emu.take_stats();
      ASSERT_EQ(s_cpu.size(), 1u);
      ASSERT_EQ(s_emu.size(), 1u);
      if (bit_exact(method) || t < warmup) {
        EXPECT_EQ(u_emu, u_cpu) << "the averaged update";
        EXPECT_EQ(r_emu, r_cpu) << "the residual";
        EXPECT_EQ(s_emu[0].local_count, s_cpu[0].local_count);
        EXPECT_EQ(s_emu[0].global_count, s_cpu[0].global_count);
        EXPECT_EQ(s_emu[0].threshold, s_cpu[0].threshold);
      } else {
        const int64_t allowed = 2 + n / 100;
        EXPECT_LE(differing(u_cpu, u_emu), allowed) << "the averaged update";
        EXPECT_LE(differing(r_cpu, r_emu), allowed) << "the residual";
        EXPECT_NEAR(s_emu[0].global_count, s_cpu[0].global_count, allowed);
      }
      // Every rank stops at the same step, so no collective is left unmatched.
      if (c.allreduce_scalar(HasFailure() ? 1.0 : 0.0, ReduceOp::Max) > 0) return;
    }
}

INSTANTIATE_TEST_SUITE_P(EveryMethod, EmuHook, ::testing::ValuesIn(sparsifier_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// The collective's input is written on the caller's stream just before the call; the
// collective's own stream must wait for it (delayed, that write lands well after the call).
TEST(EmuCollective, WaitsForTheCallersStream) {
  Communicator& c = world();
  const Device emu = process_device();
  const int before = emu::task_delay_us();  // the delayed ctest setting, kept for the rest
  emu::set_task_delay_us(20000);
  Tensor t = Tensor::zeros({3}, DType::F32, emu);
  const float mine = static_cast<float>(c.rank() + 1);
  emu::current_stream(emu.index).enqueue([t, mine] {
    float* p = t.as_host_memory().f32();
    for (int i = 0; i < 3; ++i) p[i] = mine;
  });
  c.allreduce(t);
  emu::set_task_delay_us(before);
  const float sum = static_cast<float>(c.size() * (c.size() + 1) / 2);
  EXPECT_EQ(t.to_vector(), std::vector<float>(3, sum));
}

TEST(EmuCollective, RefusesHostTensorsAndForeignThreads) {
  Communicator& c = world();
  const MpiCommunicator bootstrap(true);
  auto coll = make_emu_communicator(bootstrap, process_device().index);
  EXPECT_EQ(coll->backend(), "emu");
  Tensor host = Tensor::zeros({2});
  try {
    coll->allreduce(host);
    FAIL() << "a host tensor reached the emulated collective";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank " + std::to_string(c.rank())), std::string::npos) << m;
    EXPECT_NE(m.find("on cpu is not on emu:"), std::string::npos) << m;
  }
  // A thread that never bound the process's device works on emu:0.
  if (process_device().index != 0) {
    Tensor t = Tensor::zeros({2}, DType::F32, process_device());
    std::string error;
    std::thread([&] {
      try {
        coll->allreduce(t);
      } catch (const Error& e) {
        error = e.what();
      }
    }).join();
    EXPECT_NE(error.find("from a thread that works on emu:0"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace st::test
