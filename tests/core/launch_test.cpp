// The CUDA kernels' launch geometry, checked on the host: grid sizes at the edges, and
// the grid-stride loop visiting every index exactly once when the grid is far smaller
// than the data (as for every tensor above kMaxGrid * kBlock = 16.8M elements).
#include <gtest/gtest.h>

#include <vector>

#include "core/cuda/launch.h"

namespace st::test {
namespace {

using cuda::grid_for;
using cuda::kBlock;
using cuda::kMaxGrid;

TEST(LaunchGeometry, GridSizesAtTheEdges) {
  EXPECT_EQ(grid_for(0), 1u);  // an empty launch still needs one block
  EXPECT_EQ(grid_for(1), 1u);
  EXPECT_EQ(grid_for(kBlock), 1u);
  EXPECT_EQ(grid_for(kBlock + 1), 2u);
  EXPECT_EQ(grid_for(kMaxGrid * kBlock), static_cast<unsigned>(kMaxGrid));
  EXPECT_EQ(grid_for(kMaxGrid * kBlock + 1), static_cast<unsigned>(kMaxGrid));
  const int64_t huge = (int64_t{1} << 31) + 7;  // past int32: no overflow, capped
  EXPECT_EQ(grid_for(huge), static_cast<unsigned>(kMaxGrid));
  EXPECT_EQ(grid_for(huge, 1024), static_cast<unsigned>(kMaxGrid));
}

// Runs the loop of every thread of a grid x dim launch over n elements on the host.
std::vector<int> visits(int64_t n, int64_t grid, int64_t dim) {
  std::vector<int> count(static_cast<size_t>(n), 0);
  for (int64_t b = 0; b < grid; ++b)
    for (int64_t t = 0; t < dim; ++t)
      for (int64_t i = cuda::grid_stride_first(b, dim, t); i < n;
           i += cuda::grid_stride_step(grid, dim))
        ++count[static_cast<size_t>(i)];
  return count;
}

TEST(LaunchGeometry, GridStrideLoopVisitsEveryIndexOnceWhenItRepeats) {
  // 3 blocks of 4 threads over 1000 elements: each thread runs about 83 iterations.
  for (int64_t n : {0, 1, 11, 12, 13, 1000, 4099}) {
    const std::vector<int> c = visits(n, 3, 4);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(c[static_cast<size_t>(i)], 1) << "n " << n << " i " << i;
  }
  // The geometry grid_for picks, shrunk: a grid capped below the block count repeats.
  const std::vector<int> c = visits(5000, std::min<int64_t>(grid_for(5000, 8), 7), 8);
  for (int v : c) ASSERT_EQ(v, 1);
}

}  // namespace
}  // namespace st::test
