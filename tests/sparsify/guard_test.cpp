// The device interface holds: every method, through SparsifyHook, reaches bucket data only
// through bulk::Ops. Each method runs twice on the same gradients, once on the plain CPU
// implementation and once on GuardedOps (tests/sparsify/guarded_ops.h: buffer memory is
// poison between calls), on 1, 2 and 4 ranks; the aggregated updates, residuals and
// result positions must agree bit for bit. Three settings: per bucket
// (two buckets, per-bucket state), a dense warm-up step first, and per tensor
// (--sp scope=tensor, for the methods that accept it). Further tests show the guard
// catching a method that reads memory behind the interface, and check a missing family's
// one-line error and the phase clock's attribution rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>

#include "comm/communicator.h"
#include "core/error.h"
#include "core/rng.h"
#include "layers/param.h"
#include "sparsify/bulk/timing_ops.h"
#include "sparsify/registry.h"
#include "sparsify/sparsify_hook.h"
#include "tests/comm/mpi_test_run.h"
#include "tests/sparsify/deferring_ops.h"
#include "tests/sparsify/guarded_ops.h"

namespace st::test {
namespace {

// The options the conformance suite uses per method: quantisers and sign send every
// element; VGC without squared gradients uses its g^2 / B fallback.
SparsifierOptions options_for(const std::string& method) {
  SparsifierOptions o;
  o.seed = 17;
  o.density = 0.01;
  if (method == "dense" || method == "qsgd" || method == "terngrad" || method == "signsgd")
    o.density = 1.0;
  if (method == "vgc") o.params["batch"] = "1";
  return o;
}

// A bucket of tensors laid out back to back (tensor scope needs the parameters), with
// heavy-tailed gradients different on every rank, step and bucket.
struct TestBucket {
  Bucket bucket;
  std::vector<int64_t> sizes;
  std::vector<Param> params;
  TestBucket(int id, std::vector<int64_t> tensor_sizes) : sizes(std::move(tensor_sizes)) {
    bucket.id = id;
    for (int64_t s : sizes) bucket.numel += s;
    params.resize(sizes.size());
  }
  Tensor gradient(int rank, int64_t t) {
    Tensor g = Tensor::empty({bucket.numel});
    Rng rng(1000003ull * rank + 7919ull * t + bucket.id);
    for (int64_t i = 0; i < bucket.numel; ++i)
      g.f32()[i] = rng.normal() * std::abs(rng.normal()) * 0.01f;
    bucket.params.clear();
    int64_t at = 0;
    for (size_t j = 0; j < sizes.size(); ++j) {
      params[j].grad = g.slice_flat(at, {sizes[j]});
      bucket.params.push_back(&params[j]);
      at += sizes[j];
    }
    return g;
  }
};

// What one run leaves: every exchange's update, and each bucket's residual and result
// positions after every step.
struct Outcome {
  std::vector<std::vector<float>> updates, residuals;
  std::vector<std::vector<int32_t>> results;
  int64_t guarded_calls = 0;  // calls the checking implementation guarded (or deferred)
};

enum class Setting { Buckets, Warmup, TensorScope, NoErrorFeedback };
// The implementation a run uses: plain CpuOps, the poisoning GuardedOps, or DeferringOps
// (element-wise passes run late, as on a stream, unless the hook fences with finish()).
enum class Impl { Plain, Guarded, Deferring };

Outcome run(const std::string& method, Setting setting, Impl impl,
            SparsifierPtr sparsifier = nullptr) {
  Communicator& c = world();
  SparsifierOptions o = options_for(method);
  if (setting == Setting::TensorScope) {
    o.params["scope"] = "tensor";
    o.params["min_tensor"] = "600";
  }
  if (setting == Setting::NoErrorFeedback) o.params["ef"] = "0";
  if (!sparsifier) sparsifier = make_sparsifier(method, o);
  SparsifyHook hook(std::move(sparsifier), o, setting == Setting::Warmup ? 1 : 0);
  auto* guard = impl == Impl::Guarded ? new GuardedOps : nullptr;
  auto* deferring = impl == Impl::Deferring ? new DeferringOps : nullptr;
  if (guard) hook.use_ops(bulk::OpsPtr(guard));
  if (deferring) hook.use_ops(bulk::OpsPtr(deferring));
  std::vector<TestBucket> buckets;
  buckets.emplace_back(0, std::vector<int64_t>{3000, 500, 2500});
  buckets.emplace_back(1, std::vector<int64_t>{2500});
  Outcome out;
  for (int64_t t = 0; t < 4; ++t)
    for (TestBucket& b : buckets) {
      Tensor g = b.gradient(c.rank(), t);
      hook.exchange(b.bucket, g, c, t);
      out.updates.push_back(g.to_vector());
      const Tensor r = hook.residual(b.bucket.id);
      out.residuals.push_back(r.defined() ? r.to_vector() : std::vector<float>());
      if (t >= (setting == Setting::Warmup ? 1 : 0))
        out.results.push_back(hook.last_result_indices(b.bucket.id));
    }
  if (guard) out.guarded_calls = guard->guarded_calls();
  if (deferring) out.guarded_calls = deferring->deferred();
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), 4 * a.size()) == 0);
}

// Counts the exchanges (and residuals) where the two runs differ in any bit.
int64_t differences(const Outcome& a, const Outcome& b) {
  int64_t d = 0;
  for (size_t i = 0; i < a.updates.size(); ++i) d += !same_bits(a.updates[i], b.updates[i]);
  for (size_t i = 0; i < a.residuals.size(); ++i) d += !same_bits(a.residuals[i], b.residuals[i]);
  d += a.results != b.results;
  return d;
}

class Guard : public ::testing::TestWithParam<std::string> {};

TEST_P(Guard, GuardedRunEqualsThePlainCpuRunBitForBit) {
  const std::string method = GetParam();
  for (Setting setting : {Setting::Buckets, Setting::Warmup, Setting::TensorScope}) {
    SCOPED_TRACE(method + (setting == Setting::Buckets  ? ", per bucket"
                           : setting == Setting::Warmup ? ", after a dense warm-up"
                                                        : ", per tensor"));
    if (setting == Setting::TensorScope) {
      SparsifierOptions o = options_for(method);
      o.params["scope"] = "tensor";
      try {
        SparsifyHook probe(make_sparsifier(method, o), o);
      } catch (const Error&) {
        continue;  // the method refuses a tensor scope (SelectScope tests cover that)
      }
    }
    const Outcome plain = run(method, setting, Impl::Plain);
    const Outcome guarded = run(method, setting, Impl::Guarded);
    EXPECT_GT(guarded.guarded_calls, 0) << "the hook did not use the guarded implementation";
    EXPECT_EQ(differences(plain, guarded), 0)
        << "the run differs once buffer memory is poisoned between bulk::Ops calls: something "
           "reads or writes bucket data behind the interface";
  }
}

// What the hook hands back -- the averaged bucket, the residual -- is read by the
// optimiser on the compute stream and by checkpoints, not by the hook's own stream: the
// exchange must fence before it returns. On DeferringOps a missing fence leaves the last
// passes queued, and the update or residual read after the exchange differs from the
// plain run (the dense warm-up's 1/P scaling, --sp ef=off's zero fill of the residual).
TEST_P(Guard, NothingIsLeftQueuedWhenTheExchangeReturns) {
  const std::string method = GetParam();
  for (Setting setting : {Setting::Buckets, Setting::Warmup, Setting::NoErrorFeedback}) {
    SCOPED_TRACE(method + (setting == Setting::Buckets  ? ", per bucket"
                           : setting == Setting::Warmup ? ", after a dense warm-up"
                                                        : ", with --sp ef=off"));
    const Outcome plain = run(method, setting, Impl::Plain);
    const Outcome late = run(method, setting, Impl::Deferring);
    EXPECT_GT(late.guarded_calls, 0) << "no pass was deferred: the run tested no fence";
    EXPECT_EQ(differences(plain, late), 0)
        << "with element-wise passes running late (as on a GPU stream), the bucket or the "
           "residual read after the exchange differs: a bulk::Ops::finish() is missing";
  }
}

INSTANTIATE_TEST_SUITE_P(Sparsifiers, Guard, ::testing::ValuesIn(sparsifier_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// Reaches a buffer's memory the way no method may (Ops' accessor for implementations).
struct Backdoor : bulk::Ops {
  static const float* memory(const bulk::Buffer& b) { return storage(b).f32(); }
};

// A device-ready Top-k that breaks the rule: it ranks by reading x's memory itself (or
// the bucket tensor it was handed), then hands its choice back through the interface.
class Cheater : public Sparsifier {
 public:
  explicit Cheater(const Tensor* bucket = nullptr) : bucket_(bucket) {}
  std::string name() const override { return "cheater"; }
  ExchangePattern pattern() const override { return ExchangePattern::UnionAllreduce; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override {
    const float* p = bucket_ ? bucket_->f32() : Backdoor::memory(x);
    std::vector<int32_t> idx(static_cast<size_t>(x.size()));
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + ctx.k, idx.end(), [p](int32_t a, int32_t b) {
      const float fa = std::abs(p[a]), fb = std::abs(p[b]);
      return fa > fb || (fa == fb && a < b);
    });
    idx.resize(static_cast<size_t>(ctx.k));
    std::sort(idx.begin(), idx.end());
    ops.upload(idx.data(), bulk::Elem::I32, ctx.k, out.indices);
    ops.resize(out.values, bulk::Elem::F32, 0);
  }

 private:
  const Tensor* bucket_;
};

// A method that reads the raw gradient side input next to x (SelectContext::grad_buffer)
// and hands its values over itself: both buffers go through bulk::Ops, so the guard
// gives the same bits.
class GradReadingTopk : public Sparsifier {
 public:
  std::string name() const override { return "grad-reading-topk"; }
  ExchangePattern pattern() const override { return ExchangePattern::AllgatherSum; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override {
    ops.topk_abs(x, {0, x.size()}, ctx.k, out.indices);
    ops.gather(x, out.indices, out.values);
    ops.gather(*ctx.grad_buffer, out.indices, grad_);
    // values[j] += 0 * grad[j]: x + 0 g, which reads the gradient at every selected position.
    ops.iota(positions_, out.indices.size(), 0);
    ops.scatter_axpy(0.0f, positions_, grad_, out.values);
  }

 private:
  bulk::Buffer grad_, positions_;
};

TEST(GuardSideInputs, AMethodReadingTheGradientGivesTheSameBits) {
  const Outcome plain =
      run("topk", Setting::Buckets, Impl::Plain, std::make_unique<GradReadingTopk>());
  const Outcome guarded =
      run("topk", Setting::Buckets, Impl::Guarded, std::make_unique<GradReadingTopk>());
  EXPECT_GT(guarded.guarded_calls, 0);
  EXPECT_EQ(differences(plain, guarded), 0);
}

TEST(GuardCatches, AMethodReadingBufferMemoryDirectly) {
  const Outcome plain = run("topk", Setting::Buckets, Impl::Plain, std::make_unique<Cheater>());
  const Outcome guarded = run("topk", Setting::Buckets, Impl::Guarded, std::make_unique<Cheater>());
  EXPECT_GT(differences(plain, guarded), 0) << "the guard missed a direct read of x";
}

TEST(GuardCatches, AMethodReadingTheBucketTensor) {
  // The method keeps a pointer to the gradient tensor and reads it during the exchange.
  Communicator& c = world();
  auto once = [&](bool guarded) {
    SparsifierOptions o = options_for("topk");
    Tensor g;
    SparsifyHook hook(std::make_unique<Cheater>(&g), o);
    if (guarded) hook.use_ops(std::make_unique<GuardedOps>());
    TestBucket b(0, {4000});
    std::vector<std::vector<float>> updates;
    for (int64_t t = 0; t < 3; ++t) {
      g = b.gradient(c.rank(), t);
      hook.exchange(b.bucket, g, c, t);
      updates.push_back(g.to_vector());
    }
    return updates;
  };
  const auto plain = once(false), guarded = once(true);
  int64_t differ = 0;
  for (size_t i = 0; i < plain.size(); ++i) differ += !same_bits(plain[i], guarded[i]);
  EXPECT_GT(differ, 0) << "the guard missed a direct read of the bucket tensor";
}

// Every operation goes through the guard by construction (it is generated from the
// operation list); a call made around it, on the CPU implementation behind it, reaches
// memory outside any guarded call: that is an error naming the gap, not a silent pass.
TEST(GuardCatches, ACallAroundTheGuard) {
  GuardedOps ops;
  bulk::Buffer b;
  const float one = 1.0f;
  ops.upload(&one, bulk::Elem::F32, 1, b);
  float back = 0.0f;
  EXPECT_THROW(ops.unguarded().download(b, 0, 1, &back), Error);
  ops.download(b, 0, 1, &back);
  EXPECT_EQ(back, 1.0f);
}

// An implementation without the quantisation family (the CPU one behind a decorator that
// withholds it).
class WithoutQuant : private CpuTarget, public bulk::Decorator {
 public:
  WithoutQuant() : Decorator(cpu) {}
  bulk::QuantOps* quant() override { return nullptr; }
};

// A method that needs a family the implementation lacks stops at its first selection
// with one line naming the method, the family and the device.
TEST(DeviceInterface, AMissingFamilyIsOneLineNamingMethodFamilyAndDevice) {
  WithoutQuant ops;
  EXPECT_EQ(ops.quant(), nullptr);
  EXPECT_NE(ops.threshold(), nullptr);
  const SparsifierPtr qsgd = make_sparsifier("qsgd", options_for("qsgd"));
  const std::vector<float> host(100, 1.0f);
  bulk::Buffer x;
  ops.upload(host.data(), bulk::Elem::F32, 100, x);
  SelectContext ctx;
  ctx.k = 1;
  DeviceSelection out;
  try {
    qsgd->select_on(ops, ctx, x, out);
    ADD_FAILURE() << "qsgd selected without the quantisation family";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--sparsifier qsgd"), std::string::npos) << m;
    EXPECT_NE(m.find("quantisation and bit packing"), std::string::npos) << m;
    EXPECT_NE(m.find("cpu"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// The attribution rule (sparsify/bulk/timing_ops.h): a phase is its wall time minus the
// collectives inside it, which are the comm phase's.
TEST(DeviceInterface, APhaseIsItsWallTimeMinusItsCollectives) {
  bulk::PhaseClock clock;
  clock.start(bulk::Phase::Pack);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  clock.add_collective(5.0);
  clock.enter(bulk::Phase::Other);
  EXPECT_EQ(clock.ms(bulk::Phase::Comm), 5.0);
  EXPECT_GE(clock.ms(bulk::Phase::Pack), 15.0);
  EXPECT_EQ(clock.ms(bulk::Phase::Decode), 0.0);
}

// TimingOps times the collectives into the clock and leaves every other call to the phase
// it runs in; results are the wrapped implementation's.
TEST(DeviceInterface, TimingOpsCountsCollectivesAsComm) {
  Communicator& c = world();
  bulk::PhaseClock clock;
  bulk::TimingOps ops(std::make_unique<bulk::CpuOps>(), clock);
  clock.start(bulk::Phase::Pack);
  const std::vector<float> host(1000, 1.0f);
  bulk::Buffer b;
  ops.upload(host.data(), bulk::Elem::F32, 1000, b);
  ops.scale(b, {0, 1000}, 2.0f);
  clock.enter(bulk::Phase::Decode);
  EXPECT_EQ(clock.ms(bulk::Phase::Comm), 0.0);
  EXPECT_GT(clock.ms(bulk::Phase::Pack), 0.0);
  ops.allreduce_sum(c, b);
  clock.enter(bulk::Phase::Other);
  EXPECT_GT(clock.ms(bulk::Phase::Comm), 0.0);
  float back = 0.0f;
  ops.download(b, 999, 1, &back);
  EXPECT_EQ(back, 2.0f * static_cast<float>(c.size()));
}

}  // namespace
}  // namespace st::test
