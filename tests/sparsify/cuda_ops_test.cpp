// bulk::CudaOps against bulk::CpuOps, call by call, on the same random inputs (many ties:
// values are rounded to 1/64). Selections, top-k, gather/scatter, unions and the exchange
// checks must agree bit for bit; sums in stats() within 1e-12 relative (both accumulate
// in double, in different orders); axpy with a factor other than a power of two within
// one ulp (the CPU loop is FMA-contracted only when the host has FMA). Skips without a
// device; SPARSETRAIN_REQUIRE_GPU=1 turns the skip into a failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "comm/communicator.h"
#include "tests/sparsify/cuda_ops_fixture.h"

namespace st::test {
namespace {

TEST_F(CudaOpsTest, MemoryCallsMatchCpu) {
  const int64_t n = 5000;
  const std::vector<float> x = values(n, 1);
  Buffer cx, gx;
  put(x, Elem::F32, cx, gx);
  EXPECT_EQ(floats_gpu(gx), x);
  // Overlapping copies inside one buffer behave as memmove.
  for (auto [from, to] : {std::pair<int64_t, int64_t>{0, 7}, {7, 0}, {100, 2000}}) {
    cpu_.copy(cx, from, cx, to, 1000);
    gpu_->copy(gx, from, gx, to, 1000);
  }
  cpu_.fill(cx, {10, 300}, -2.5f);
  gpu_->fill(gx, {10, 300}, -2.5f);
  EXPECT_EQ(floats_gpu(gx), floats_cpu(cx));
  Buffer ci, gi;
  cpu_.iota(ci, 777, -5);
  gpu_->iota(gi, 777, -5);
  EXPECT_EQ(ints_gpu(gi), ints_cpu(ci));
  // A slice aliases its buffer: writes through it land in the parent.
  Buffer cs = cpu_.slice(cx, 400, 50), gs = gpu_->slice(gx, 400, 50);
  cpu_.fill(cs, {0, 50}, 9.0f);
  gpu_->fill(gs, {0, 50}, 9.0f);
  EXPECT_EQ(floats_gpu(gx), floats_cpu(cx));
  float h[3] = {};
  gpu_->download(gx, 399, 3, h);
  EXPECT_EQ(h[1], 9.0f);
  // A wrapped tensor is the tensor's memory.
  Tensor t = Tensor::from_vector(x, {n}).to(Device::cuda(0));
  Buffer w = gpu_->wrap(t);
  gpu_->scale(w, {0, n}, 2.0f);
  gpu_->release(w);
  const std::vector<float> doubled = t.to_vector();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(doubled[i], 2.0f * x[i]) << i;
}

TEST_F(CudaOpsTest, ElementwiseMatchesCpu) {
  const int64_t n = 300001;
  const std::vector<float> x = values(n, 2), y = values(n, 3);
  Buffer cx, gx, cy, gy;
  put(x, Elem::F32, cx, gx);
  for (float a : {1.0f, -1.0f, 0.5f, 0.3f}) {
    put(y, Elem::F32, cy, gy);
    const Range r{123, n - 7};
    cpu_.axpy(a, cx, r, cy);
    gpu_->axpy(a, gx, r, gy);
    const std::vector<float> c = floats_cpu(cy), g = floats_gpu(gy);
    for (int64_t i = 0; i < n; ++i) {
      if (a == 0.3f) {
        ASSERT_LE(std::abs(c[i] - g[i]), std::abs(c[i]) * 1.2e-7f) << "a=" << a << " i=" << i;
      } else {
        ASSERT_EQ(c[i], g[i]) << "a=" << a << " i=" << i;
      }
    }
  }
  cpu_.scale(cy, {0, n}, 0.37f);
  gpu_->scale(gy, {0, n}, 0.37f);
  EXPECT_EQ(floats_gpu(gy), floats_cpu(cy));
}

TEST_F(CudaOpsTest, StatisticsMatchCpu) {
  const int64_t n = 1 << 20;
  const std::vector<float> x = values(n, 4);
  Buffer cx, gx;
  put(x, Elem::F32, cx, gx);
  for (Range r : {Range{0, n}, Range{17, 17}, Range{5, 70000}, Range{n - 3, n}}) {
    const bulk::Stats c = cpu_.stats(cx, r), g = gpu_->stats(gx, r);
    EXPECT_EQ(g.count, c.count);
    EXPECT_EQ(g.abs_max, c.abs_max);
    EXPECT_NEAR(g.sum, c.sum, 1e-12 * c.abs_sum + 1e-300);
    EXPECT_NEAR(g.abs_sum, c.abs_sum, 1e-12 * c.abs_sum);
    EXPECT_NEAR(g.sum_sq, c.sum_sq, 1e-12 * c.sum_sq);
    for (float tau : {0.0f, 0.5f, 1.0f, 1e9f})
      for (bool strict : {false, true})
        EXPECT_EQ(gpu_->count_abs(gx, r, tau, strict), cpu_.count_abs(cx, r, tau, strict))
            << "tau=" << tau << " strict=" << strict << " r=[" << r.begin << "," << r.end << ")";
  }
}

TEST_F(CudaOpsTest, ThresholdSelectionMatchesCpu) {
  const int64_t n = 250000;
  const std::vector<float> x = values(n, 5);
  Buffer cx, gx, co, go;
  put(x, Elem::F32, cx, gx);
  for (Range r : {Range{0, n}, Range{1001, 200000}, Range{9, 9}})
    for (float tau : {0.0f, 0.5f, 1.0f, 3.0f, 1e9f})
      for (bool strict : {false, true}) {
        cpu_.select_abs(cx, r, tau, strict, co);
        gpu_->select_abs(gx, r, tau, strict, go);
        EXPECT_EQ(ints_gpu(go), ints_cpu(co)) << "tau=" << tau << " strict=" << strict;
      }
  // MiCRO/ExDyna: the passing positions of the owned partition, or the fallback position
  // when none passes (tau = 1e9), nothing for an empty partition.
  for (Range owned : {Range{0, n}, Range{60000, 125000}, Range{5, 5}})
    for (float tau : {0.25f, 2.0f, 1e9f})
      for (int64_t t : {0, 7, 123457}) {
        cpu_.threshold_select(cx, owned, tau, t, co);
        gpu_->threshold_select(gx, owned, tau, t, go);
        EXPECT_EQ(ints_gpu(go), ints_cpu(co)) << "tau=" << tau << " t=" << t;
      }
}

TEST_F(CudaOpsTest, TopkMatchesCpu) {
  for (int64_t n : {1, 1000, 300000}) {
    const std::vector<float> x = values(n, 6);
    Buffer cx, gx, co, go;
    put(x, Elem::F32, cx, gx);
    for (Range r : {Range{0, n}, Range{n / 3, n}})
      for (int64_t k :
           {int64_t{0}, int64_t{1}, r.size() / 100 + 1, r.size() - 1, r.size(), r.size() + 5}) {
        const float tc = cpu_.topk_abs(cx, r, k, co);
        const float tg = gpu_->topk_abs(gx, r, k, go);
        EXPECT_EQ(ints_gpu(go), ints_cpu(co)) << "n=" << n << " k=" << k;
        EXPECT_EQ(tg, tc) << "n=" << n << " k=" << k;
      }
    // Restricted to candidates: every third position.
    std::vector<int32_t> cand;
    for (int64_t i = 0; i < n; i += 3) cand.push_back(static_cast<int32_t>(i));
    Buffer cc, gc;
    put(cand, Elem::I32, cc, gc);
    const auto c = static_cast<int64_t>(cand.size());
    for (int64_t k : {int64_t{0}, int64_t{1}, c / 10 + 1, c, c + 1}) {
      const float tc = cpu_.topk_abs_among(cx, cc, k, co);
      const float tg = gpu_->topk_abs_among(gx, gc, k, go);
      EXPECT_EQ(ints_gpu(go), ints_cpu(co)) << "n=" << n << " k=" << k;
      EXPECT_EQ(tg, tc) << "n=" << n << " k=" << k;
    }
  }
}

TEST_F(CudaOpsTest, GatherAndScattersMatchCpu) {
  const int64_t n = 100000, m = 30000;
  const std::vector<float> x = values(n, 7), v = values(m, 8);
  const std::vector<int32_t> idx = positions(m, n / 4, 9);  // many repeated positions
  Buffer cx, gx, cv, gv, ci, gi, co, go;
  put(x, Elem::F32, cx, gx);
  put(v, Elem::F32, cv, gv);
  put(idx, Elem::I32, ci, gi);
  cpu_.gather(cx, ci, co);
  gpu_->gather(gx, gi, go);
  EXPECT_EQ(floats_gpu(go), floats_cpu(co));
  // Repeats add up in index order on both, so even these sums agree bit for bit.
  cpu_.scatter_add(ci, cv, cx);
  gpu_->scatter_add(gi, gv, gx);
  EXPECT_EQ(floats_gpu(gx), floats_cpu(cx));
  for (float a : {-1.0f, 0.5f}) {
    cpu_.scatter_axpy(a, ci, cv, cx);
    gpu_->scatter_axpy(a, gi, gv, gx);
    EXPECT_EQ(floats_gpu(gx), floats_cpu(cx)) << "a=" << a;
  }
  // The last write of a repeated position wins on both.
  cpu_.scatter_scaled(ci, cv, 0.25f, cx);
  gpu_->scatter_scaled(gi, gv, 0.25f, gx);
  EXPECT_EQ(floats_gpu(gx), floats_cpu(cx));
  const std::vector<int32_t> few = positions(500, n, 10);
  Buffer cf, gf;
  put(few, Elem::I32, cf, gf);
  cpu_.zero_at(cf, cx);
  gpu_->zero_at(gf, gx);
  EXPECT_EQ(floats_gpu(gx), floats_cpu(cx));
}

// 2^25 elements: past kMaxGrid * kBlock (16.8M), so every grid-stride loop of each kernel
// family -- element-wise, statistics, selection, gather and scatter -- runs a second round.
TEST_F(CudaOpsTest, EveryFamilyMatchesCpuWhereGridStrideLoopsRepeat) {
  const int64_t n = int64_t{1} << 25, m = 1 << 20;
  const std::vector<float> x = values(n, 21), y = values(n, 22), v = values(m, 23);
  const std::vector<int32_t> idx = positions(m, n, 24);
  Buffer cx, gx, cy, gy, cv, gv, ci, gi, co, go;
  put(x, Elem::F32, cx, gx);
  put(y, Elem::F32, cy, gy);
  put(v, Elem::F32, cv, gv);
  put(idx, Elem::I32, ci, gi);
  cpu_.axpy(-1.0f, cx, {0, n}, cy);
  gpu_->axpy(-1.0f, gx, {0, n}, gy);
  cpu_.scale(cy, {3, n}, 0.5f);
  gpu_->scale(gy, {3, n}, 0.5f);
  EXPECT_EQ(floats_gpu(gy), floats_cpu(cy)) << "element-wise";
  const bulk::Stats c = cpu_.stats(cx, {0, n}), g = gpu_->stats(gx, {0, n});
  EXPECT_EQ(g.abs_max, c.abs_max);
  EXPECT_NEAR(g.sum_sq, c.sum_sq, 1e-12 * c.sum_sq) << "statistics";
  EXPECT_EQ(gpu_->count_abs(gx, {0, n}, 2.0f, false), cpu_.count_abs(cx, {0, n}, 2.0f, false));
  cpu_.select_abs(cx, {0, n}, 3.0f, true, co);
  gpu_->select_abs(gx, {0, n}, 3.0f, true, go);
  EXPECT_EQ(ints_gpu(go), ints_cpu(co)) << "selection";
  cpu_.gather(cx, ci, co);
  gpu_->gather(gx, gi, go);
  EXPECT_EQ(floats_gpu(go), floats_cpu(co)) << "gather";
  cpu_.scatter_add(ci, cv, cx);
  gpu_->scatter_add(gi, gv, gx);
  EXPECT_EQ(floats_gpu(gx), floats_cpu(cx)) << "scatter";
}

TEST_F(CudaOpsTest, UnionHasTheSamePositionsAscending) {
  const int64_t domain = 50000;
  // Three ranks' segments at offsets with padding between them (the padded allgather).
  const std::vector<int64_t> counts = {4000, 0, 2500}, offsets = {0, 4000, 5000};
  std::vector<int32_t> all(7500, 0);
  for (size_t r = 0; r < counts.size(); ++r) {
    const std::vector<int32_t> p = positions(counts[r], domain, 20 + r);
    std::copy(p.begin(), p.end(), all.begin() + offsets[r]);
  }
  Buffer ca, ga, co, go;
  put(all, Elem::I32, ca, ga);
  cpu_.union_of(ca, offsets, counts, domain, co);
  gpu_->union_of(ga, offsets, counts, domain, go);
  std::vector<int32_t> c = ints_cpu(co);
  const std::vector<int32_t> g = ints_gpu(go);
  EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
  std::sort(c.begin(), c.end());
  EXPECT_EQ(g, c);
}

TEST_F(CudaOpsTest, ExchangeChecksMatchCpu) {
  const std::vector<int32_t> idx = positions(20000, 90000, 30);
  Buffer ci, gi;
  put(idx, Elem::I32, ci, gi);
  cpu_.offset_indices(ci, 1234);
  gpu_->offset_indices(gi, 1234);
  EXPECT_EQ(ints_gpu(gi), ints_cpu(ci));
  const bulk::IndexBounds bc = cpu_.index_bounds(ci), bg = gpu_->index_bounds(gi);
  EXPECT_EQ(bg.min, bc.min);
  EXPECT_EQ(bg.max, bc.max);
  Buffer empty;
  gpu_->resize(empty, Elem::I32, 0);
  EXPECT_EQ(gpu_->index_bounds(empty).max, -1);
  const std::vector<int64_t> segments = {0, 1000, 1001, 50000, 80000};
  EXPECT_EQ(gpu_->segment_counts(gi, 100, 15000, segments),
            cpu_.segment_counts(ci, 100, 15000, segments));
  Buffer gj;
  gpu_->upload(idx.data(), Elem::I32, static_cast<int64_t>(idx.size()), gj);
  EXPECT_FALSE(gpu_->same_bits(gi, gj));
  gpu_->offset_indices(gj, 1234);
  EXPECT_TRUE(gpu_->same_bits(gi, gj));
}

TEST_F(CudaOpsTest, CollectivesOnOneRankMatchCpu) {
  // One process (Local backend): the buffers are staged through the host. Multi-rank
  // NCCL runs are in the hook test.
  auto comm = make_communicator("local");
  const std::vector<float> x = values(1000, 40);
  Buffer cx, gx, co, go;
  put(x, Elem::F32, cx, gx);
  cpu_.allreduce_sum(*comm, cx);
  gpu_->allreduce_sum(*comm, gx);
  EXPECT_EQ(floats_gpu(gx), floats_cpu(cx));
  cpu_.allgatherv(*comm, cx, {1000}, co);
  gpu_->allgatherv(*comm, gx, {1000}, go);
  EXPECT_EQ(floats_gpu(go), floats_cpu(co));
  cpu_.allgather(*comm, cx, co);
  gpu_->allgather(*comm, gx, go);
  EXPECT_EQ(floats_gpu(go), floats_cpu(co));
  gpu_->broadcast(*comm, gx, 0);
  EXPECT_EQ(floats_gpu(gx), x);
}

}  // namespace
}  // namespace st::test
