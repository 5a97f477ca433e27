// ShortcutPadA (He et al. 2016 option A shortcut): known values and shape errors (its
// gradient checks are rows of the layer case table, tests/layers/layer_cases.cpp).
#include <gtest/gtest.h>

#include "models/shortcut_pad.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

// One 1-channel 3x3 image 1..9 to 3 channels at stride 2: the middle channel holds the
// pixels (0,0), (0,2), (2,0), (2,2); the others are zero. Backward scatters back.
TEST(KnownValues, ShortcutPadA) {
  ShortcutPadA pad(1, 3, 2);
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor y = pad.forward(x);
  ASSERT_EQ(y.shape(), Shape({1, 3, 2, 2}));
  EXPECT_EQ(y.to_vector(), std::vector<float>({0, 0, 0, 0, 1, 3, 7, 9, 0, 0, 0, 0}));
  Tensor dx = pad.backward(Tensor::from_vector({9, 9, 9, 9, 1, 2, 3, 4, 9, 9, 9, 9}, {1, 3, 2, 2}));
  EXPECT_EQ(dx.to_vector(), std::vector<float>({1, 0, 2, 0, 0, 0, 3, 0, 4}));
}

TEST(ShapeErrors, ShortcutPadA) {
  ShortcutPadA pad(16, 32, 2);
  EXPECT_THROW(pad.forward(Tensor::zeros({2, 8, 4, 4})), Error);
  EXPECT_THROW(ShortcutPadA(32, 16, 2), Error);
}

}  // namespace
}  // namespace st::test
