// The two-level exchange (comm/hierarchical_hook.h) and the exchange plan
// (comm/planned_hook.h), under mpirun with 1, 2 and 4 ranks: the communicator's split and
// reduce-scatter; two levels with one rank per node and with one node equal the flat
// exchange bit for bit; on 2 nodes x 2 ranks, Top-k's update and residuals equal a
// reference computed here (dense inside a node, Top-k's union across nodes); every method
// either runs two-level (the same update on every rank) or is refused at start in one line;
// the steps through shared memory give the node group's collectives' bits;
// the plan's choice flips where its model says; a resumed plan is kept.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "comm/communicator.h"
#include "comm/hierarchical_hook.h"
#include "comm/local_communicator.h"
#include "comm/planned_hook.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/safetensors.h"
#include "sparsify/registry.h"
#include "sparsify/sparsify_hook.h"
#include "tests/comm/mpi_test_run.h"
#include "train/exchange_setup.h"

namespace st::test {
namespace {

// Rank r's gradient at an iteration: distinct, no ties, a few large entries.
float grad(int rank, int64_t i, int64_t iteration) {
  const double u = std::sin(0.37 * static_cast<double>(i) + 1.3 * rank + 0.71 * iteration);
  return static_cast<float>(u * u * u + 1e-4 * (i % 97) - 0.01 * rank);
}

Tensor grads_of(int rank, int64_t n, int64_t iteration) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = grad(rank, i, iteration);
  return Tensor::from_vector(v, {n});
}

std::shared_ptr<SparsifyHook> hook_of(const std::string& method, double density = 0.02) {
  SparsifierOptions o;
  o.density = density;
  o.seed = 3;
  return std::make_shared<SparsifyHook>(make_sparsifier(method, o), o);
}

Bucket bucket_of(int id, int64_t n) {
  Bucket b;
  b.id = id;
  b.numel = n;
  return b;
}

// The exchanged buckets of `iterations` exchanges of two buckets through `hook`.
std::vector<std::vector<float>> run(BucketHook& hook, int iterations) {
  Communicator& comm = world();
  std::vector<std::vector<float>> out;
  const int64_t sizes[] = {1001, 257};
  for (int it = 0; it < iterations; ++it)
    for (int b = 0; b < 2; ++b) {
      Tensor g = grads_of(comm.rank(), sizes[b], it + 10 * b);
      hook.exchange(bucket_of(b, sizes[b]), g, comm, it);
      out.emplace_back(g.f32(), g.f32() + g.numel());
    }
  return out;
}

TEST(Split, GroupsByColorOrderedByKey) {
  Communicator& comm = world();
  const int color = comm.rank() % 2;
  auto group = comm.split(color, -comm.rank());  // reversed order inside the group
  int members = 0;
  for (int r = 0; r < comm.size(); ++r) members += r % 2 == color;
  ASSERT_EQ(group->size(), members);
  int above = 0;  // ranks of my color above mine come first
  for (int r = comm.rank() + 1; r < comm.size(); ++r) above += r % 2 == color;
  EXPECT_EQ(group->rank(), above);
  Tensor t = Tensor::full({3}, static_cast<float>(comm.rank()));
  group->allreduce(t);
  float want = 0;
  for (int r = color; r < comm.size(); r += 2) want += static_cast<float>(r);
  EXPECT_EQ(t.f32()[2], want);
}

TEST(ReduceScatter, SumsAndKeepsEachRanksPart) {
  Communicator& comm = world();
  const int p = comm.size();
  std::vector<int64_t> counts;
  for (int r = 0; r < p; ++r) counts.push_back(3 + 2 * r);  // uneven on purpose
  const int64_t n = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  const Tensor in = grads_of(comm.rank(), n, 0);
  Tensor out = Tensor::empty({counts[static_cast<size_t>(comm.rank())]});
  comm.reduce_scatter(in, out, counts);
  int64_t offset = 0;
  for (int r = 0; r < comm.rank(); ++r) offset += counts[static_cast<size_t>(r)];
  for (int64_t i = 0; i < out.numel(); ++i) {
    float want = 0;
    for (int r = 0; r < p; ++r) want += grad(r, offset + i, 0);
    EXPECT_NEAR(out.f32()[i], want, 1e-5f) << i;
  }
  // The base class's way (allreduce, then the part) gives the same.
  Tensor base_out = Tensor::empty({out.numel()});
  comm.Communicator::reduce_scatter(in, base_out, counts);
  for (int64_t i = 0; i < out.numel(); ++i) EXPECT_NEAR(base_out.f32()[i], out.f32()[i], 1e-5f);
  Tensor wrong = Tensor::empty({out.numel() + 1});
  EXPECT_THROW(comm.reduce_scatter(in, wrong, counts), Error);
}

TEST(NodeLayout, HostNamesAndRanksPerNode) {
  Communicator& comm = world();
  const NodeLayout hosts = find_node_layout(comm, 0);  // one machine: one node
  EXPECT_EQ(hosts.nodes, 1);
  EXPECT_EQ(hosts.local_size, comm.size());
  EXPECT_EQ(hosts.local_rank, comm.rank());
  const NodeLayout ones = find_node_layout(comm, 1);
  EXPECT_EQ(ones.nodes, comm.size());
  EXPECT_EQ(ones.node, comm.rank());
  if (comm.size() == 4) {
    const NodeLayout pairs = find_node_layout(comm, 2);
    EXPECT_EQ(pairs.describe(), "2 nodes x 2 ranks");
    EXPECT_EQ(pairs.node, comm.rank() / 2);
    EXPECT_EQ(pairs.local_rank, comm.rank() % 2);
    EXPECT_THROW(find_node_layout(comm, 3), Error);  // 4 ranks do not fill nodes of 3
  }
  EXPECT_EQ(slice_counts(10, 3), (std::vector<int64_t>{3, 3, 4}));
}

// One rank per node (reduce-scatter and allgather are copies) and one node (nothing
// crosses a slow link) both give the flat exchange's bits, for methods of every pattern.
TEST(TwoLevel, OneRankPerNodeAndOneNodeEqualFlat) {
  Communicator& comm = world();
  for (const char* method : {"topk", "gtopk", "micro", "exdyna", "sidco-e", "powersgd", "qsgd"}) {
    auto flat = hook_of(method);
    const auto want = run(*flat, 3);
    for (int per_node : {1, comm.size()}) {
      HierarchicalHook two(hook_of(method), comm, find_node_layout(comm, per_node));
      EXPECT_EQ(run(two, 3), want) << method << " with " << per_node << " ranks per node";
    }
  }
}

// 2 nodes x 2 ranks, Top-k (union-allreduce): slice l of the bucket is selected among the
// ranks of local rank l, on the node means; the union's positions carry the mean over the
// nodes of those means, and each node's residual is its x off the union.
TEST(TwoLevel, TopkOnTwoNodesMatchesAHandReference) {
  Communicator& comm = world();
  if (comm.size() != 4) GTEST_SKIP() << "needs 4 ranks (2 nodes x 2)";
  const int64_t n = 1000, half = n / 2;
  const double d = 0.02;
  const int64_t k = static_cast<int64_t>(std::floor(d * static_cast<double>(half)));
  auto inner = hook_of("topk", d);
  HierarchicalHook two(inner, comm, find_node_layout(comm, 2));
  // residual[node][i] over the whole bucket (each slice's owner keeps its part)
  std::vector<std::vector<float>> residual(2, std::vector<float>(n, 0.0f));
  for (int it = 0; it < 3; ++it) {
    Tensor g = grads_of(comm.rank(), n, it);
    two.exchange(bucket_of(0, n), g, comm, it);
    std::vector<float> want(n, 0.0f);
    std::vector<std::vector<float>> x(2, std::vector<float>(n));
    for (int node = 0; node < 2; ++node)
      for (int64_t i = 0; i < n; ++i)
        x[node][i] = (grad(2 * node, i, it) + grad(2 * node + 1, i, it)) * 0.5f + residual[node][i];
    for (int64_t lo : {int64_t{0}, half}) {
      std::vector<bool> in_union(n, false);
      for (int node = 0; node < 2; ++node) {
        std::vector<int64_t> order(half);
        std::iota(order.begin(), order.end(), lo);
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
          return std::fabs(x[node][a]) > std::fabs(x[node][b]);
        });
        for (int64_t j = 0; j < k; ++j) in_union[order[j]] = true;
      }
      for (int64_t i = lo; i < lo + half; ++i) {
        if (!in_union[i]) continue;
        want[i] = (x[0][i] + x[1][i]) * 0.5f;
        x[0][i] = x[1][i] = 0.0f;
      }
    }
    residual = x;
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(g.f32()[i], want[i], 1e-6f) << "iteration " << it << " element " << i;
    // This rank's residual is its node's over its own slice.
    const Tensor mine = inner->residual(0);
    const int l = comm.rank() % 2, node = comm.rank() / 2;
    ASSERT_EQ(mine.numel(), half);
    for (int64_t i = 0; i < half; ++i)
      ASSERT_NEAR(mine.f32()[i], residual[node][l * half + i], 1e-6f) << it << " " << i;
  }
}

// The steps inside a node through shared memory give the bits of the node group's
// collectives (reduce-scatter, 1 / L, the method across nodes, allgather), computed here
// with a second hook of the same method: over iterations (error feedback) and buckets of
// changing sizes (the segments' regions reused), for dense, Top-k and MiCRO.
TEST(TwoLevel, SharedMemoryStepsGiveTheCollectivesBits) {
  Communicator& comm = world();
  if (comm.size() != 4) GTEST_SKIP() << "needs 4 ranks (2 nodes x 2)";
  const NodeLayout layout = find_node_layout(comm, 2);
  for (const std::string& method :
       {std::string("dense"), std::string("topk"), std::string("micro")}) {
    std::shared_ptr<BucketHook> inner, ref_inner;
    if (method == "dense") {
      inner = std::make_shared<AllreduceHook>();
      ref_inner = std::make_shared<AllreduceHook>();
    } else {
      inner = hook_of(method);
      ref_inner = hook_of(method);
    }
    HierarchicalHook two(inner, comm, layout);
    HierarchicalHook groups(ref_inner, comm, layout);  // only its groups are used
    ASSERT_NE(two.node_group()->shared_segments(), nullptr) << "one host: memory is shared";
    const int L = layout.local_size, l = layout.local_rank;
    const int64_t sizes[] = {1001, 257, 4000};
    for (int it = 0; it < 3; ++it)
      for (int b = 0; b < 3; ++b) {
        const int64_t n = sizes[b];
        Tensor g = grads_of(comm.rank(), n, it + 10 * b);
        Tensor want = g.clone();
        two.exchange(bucket_of(b, n), g, comm, it);
        const std::vector<int64_t> counts = slice_counts(n, L);
        const Bucket slice = groups.slice_of(bucket_of(b, n));
        Tensor part = Tensor::empty({counts[static_cast<size_t>(l)]});
        groups.node_group()->reduce_scatter(want, part, counts);
        scale_inplace(part, 1.0f / static_cast<float>(L));
        ref_inner->exchange(slice, part, *groups.cross_group(), it);
        groups.node_group()->allgatherv(part, want, counts);
        ASSERT_EQ(std::memcmp(g.f32(), want.f32(), want.nbytes()), 0)
            << method << ", iteration " << it << ", bucket " << b;
      }
  }
}

// Every listed method, on the largest layout this world has: either the same finite
// update on every rank, or a one-line refusal at start naming the method and the flag.
TEST(TwoLevel, EveryMethodRunsOrIsRefusedAtStart) {
  Communicator& comm = world();
  const int per_node = comm.size() >= 4 ? 2 : 1;
  for (const std::string& method : sparsifier_names()) {
    TrainConfig c;
    c.sparsifier = method;
    c.hierarchy = std::to_string(per_node);
    if (sparsifier_uses_sq_grads(method)) {
      try {
        check_exchange_flags(c);
        ADD_FAILURE() << method << " needs whole buckets but was not refused";
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(method), std::string::npos) << what;
        EXPECT_NE(what.find("--hierarchy"), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      }
      continue;
    }
    EXPECT_NO_THROW(check_exchange_flags(c)) << method;
    HierarchicalHook two(hook_of(method), comm, find_node_layout(comm, per_node));
    for (const std::vector<float>& bucket : run(two, 3)) {
      for (float v : bucket) ASSERT_TRUE(std::isfinite(v)) << method;
      Tensor mine = Tensor::from_vector(bucket, {static_cast<int64_t>(bucket.size())});
      Tensor all = Tensor::empty({comm.size() * mine.numel()});
      comm.allgather(mine, all);
      for (int r = 1; r < comm.size(); ++r)
        ASSERT_TRUE(std::equal(all.f32(), all.f32() + mine.numel(), all.f32() + r * mine.numel()))
            << method << ": rank " << r << " applies another update";
    }
  }
  TrainConfig tensor_scope;
  tensor_scope.sparsifier = "topk";
  tensor_scope.hierarchy = "node";
  tensor_scope.sparsifier_params["scope"] = "tensor";
  EXPECT_THROW(check_exchange_flags(tensor_scope), Error);
}

// Dense two-level averaging is the mean over all ranks (another summation order).
TEST(TwoLevel, DenseIsTheMean) {
  Communicator& comm = world();
  HierarchicalHook two(std::make_shared<AllreduceHook>(), comm,
                       find_node_layout(comm, comm.size() >= 4 ? 2 : 1));
  Tensor g = grads_of(comm.rank(), 999, 0);
  two.exchange(bucket_of(0, 999), g, comm, 0);
  for (int64_t i = 0; i < 999; ++i) {
    float want = 0;
    for (int r = 0; r < comm.size(); ++r) want += grad(r, i, 0);
    ASSERT_NEAR(g.f32()[i], want / static_cast<float>(comm.size()), 1e-6f) << i;
  }
}

// The choice flips once, where the two lines cross: dense costs a link's latency and
// 4 bytes an element at its bandwidth; compression a larger fixed cost (selection set-up,
// more collectives) and less per element.
TEST(Plan, ChoiceFlipsWhereTheModelSays) {
  const double alpha_ms = 0.05, ms_per_byte = 1e-5;  // about 100 MB/s, a 1 Gbit/s link
  PlanModel model;
  model.dense = {alpha_ms, 4 * ms_per_byte};
  model.compressed = {0.45, 1e-6 * 8};  // 8 ns/element: selection and 1% of the bytes
  const double m = kCompressMargin;
  const double flip = (model.compressed.fixed_ms - m * model.dense.fixed_ms) /
                      (m * model.dense.ms_per_element - model.compressed.ms_per_element);
  const int64_t at = static_cast<int64_t>(flip);  // 13250
  const auto rows = choose_plan(model, {bucket_of(0, at - 100), bucket_of(1, at + 100),
                                        bucket_of(2, 10), bucket_of(3, 10 * at)});
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].choice, BucketChoice::Dense);
  EXPECT_EQ(rows[1].choice, BucketChoice::Compressed);
  EXPECT_EQ(rows[2].choice, BucketChoice::Dense);
  EXPECT_EQ(rows[3].choice, BucketChoice::Compressed);
  // A ten times faster link moves the flip ten times further out.
  model.dense.ms_per_element /= 10;
  EXPECT_EQ(choose_plan(model, {bucket_of(0, 10 * at)})[0].choice, BucketChoice::Dense);
  EXPECT_NE(describe_plan(rows).find("compressed"), std::string::npos);
  const LinearCost line = LinearCost::through(100, 1.0, 300, 2.0);
  EXPECT_DOUBLE_EQ(line.at(500), 3.0);
}

// The Reducer's cutting rule as a function: a bucket closes before the parameter that
// would take it past its cap; the first bucket has its own cap; a parameter larger than
// the cap sits alone.
TEST(Plan, BucketsAreCutAsTheReducerCutsThem) {
  ReducerOptions opt;
  opt.first_bucket_mb = 1;  // 262144 elements
  opt.bucket_cap_mb = 2;    // 524288 elements
  const std::vector<int64_t> numels = {200000, 100000, 300000, 300000, 1000000, 10};
  EXPECT_EQ(cut_buckets(numels, opt), (std::vector<int>{0, 1, 1, 2, 3, 4}));
}

// The cap: the smallest at which every bucket after the first spends at most
// kFixedShare of its predicted time on its exchange's fixed cost.
TEST(Plan, BucketCapAmortisesTheFixedCost) {
  // Eight parameters of 2^20 elements (4 MB each) after a small first one.
  std::vector<int64_t> numels = {1000};
  for (int i = 0; i < 8; ++i) numels.push_back(int64_t{1} << 20);
  PlanModel model;
  model.dense = {0.0, 1e-6};       // no fixed cost: buckets as small as possible
  model.compressed = {1e9, 1e-6};  // never chosen
  BucketCapChoice pick = choose_bucket_cap(model, numels, 1, 1);
  EXPECT_EQ(pick.cap_mb, 1);
  EXPECT_EQ(pick.buckets, 9u);
  // A fixed cost of 0.3 ms at 1 ns/element: one 4 MB parameter a bucket (up to a 4 MB cap)
  // spends 22% of its 1.35 ms on it, two (8 MB) 12.5%, four (16 MB) 6.7% -> 16 MB.
  model.dense = {0.3, 1e-6};
  pick = choose_bucket_cap(model, numels, 1, 1);
  EXPECT_EQ(pick.cap_mb, 16);
  EXPECT_EQ(pick.buckets, 3u);
  EXPECT_LE(pick.worst_fixed_share, kFixedShare);
  // Cut in 2 slices (two levels), a bucket's slice is half as long: 16 MB gives 12.5%,
  // 25 MB leaves a last bucket of two parameters (22%), 64 MB takes all eight (6.7%).
  EXPECT_EQ(choose_bucket_cap(model, numels, 1, 2).cap_mb, 64);
  // No cap gets there: the one whose worst bucket does best (one bucket of all 8).
  model.dense = {100.0, 1e-6};
  pick = choose_bucket_cap(model, numels, 1, 1);
  EXPECT_GE(pick.cap_mb, 32);
  EXPECT_EQ(pick.buckets, 2u);
  EXPECT_GT(pick.worst_fixed_share, kFixedShare);
}

TEST(Plan, EncodedPlanRoundTripsAndBadTextIsRefused) {
  const std::vector<BucketChoice> plan = {BucketChoice::Compressed, BucketChoice::Dense};
  EXPECT_EQ(encode_plan(plan), "compressed,dense");
  EXPECT_EQ(decode_plan("compressed,dense", 2, "ck"), plan);
  EXPECT_THROW(decode_plan("compressed,sparse", 2, "ck"), Error);
  EXPECT_THROW(decode_plan("dense", 2, "ck"), Error);
}

// A resumed run takes the saved plan instead of probing (which could choose otherwise).
TEST(Plan, ResumeKeepsTheSavedPlan) {
  LocalCommunicator local;
  TrainConfig c;
  c.sparsifier = "topk";
  c.plan = "auto";
  c.resume = "saved.safetensors";
  ExchangeSetup setup(c, local);
  const std::map<std::string, std::string> saved = {{"exchange_plan", "dense,compressed"}};
  setup.make_plan({bucket_of(0, 4096), bucket_of(1, 64)}, &saved, Device::cpu(), true);
  std::map<std::string, std::string> meta;
  setup.add_metadata(meta);
  EXPECT_EQ(meta["exchange_plan"], "dense,compressed");
  EXPECT_THROW(setup.make_plan({bucket_of(0, 4096)}, &saved, Device::cpu(), true), Error);
}

// The bucket cap of a resumed plan is its checkpoint's, whatever --bucket-cap-mb says: the
// saved choices belong to those buckets.
TEST(Plan, ResumeKeepsTheSavedBucketCap) {
  // One file per rank: the ranks of an mpirun run this test side by side.
  const std::string path =
      ::testing::TempDir() + "plan_cap_" + std::to_string(world().rank()) + ".safetensors";
  TensorFile file;
  file.tensors.emplace_back("w", Tensor::zeros({2}));
  file.metadata = {{"exchange_plan", "dense,compressed"}, {"bucket_cap_mb", "256"}};
  save_safetensors(path, file);
  LocalCommunicator local;
  TrainConfig c;
  c.sparsifier = "topk";
  c.plan = "auto";
  c.resume = path;
  ExchangeSetup setup(c, local);
  ReducerOptions flag;
  flag.bucket_cap_mb = 0.5;
  EXPECT_EQ(setup.bucket_cap_mb({1000, 2000}, flag, Device::cpu(), true), 256);
  c.plan = "off";  // without a plan the flag's cap stands
  ExchangeSetup plain(c, local);
  EXPECT_EQ(plain.bucket_cap_mb({1000, 2000}, flag, Device::cpu(), true), 0.5);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace st::test
