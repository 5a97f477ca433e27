#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "core/error.h"
#include "data/transform.h"

namespace st::test {
namespace {

// A planar C x H x W image whose pixel (c, y, x) is 10 * (c * H * W + y * W + x) + 5.
struct TestImage {
  int c, h, w;
  std::vector<uint8_t> px;
  TestImage(int c_, int h_, int w_) : c(c_), h(h_), w(w_), px(static_cast<size_t>(c_) * h_ * w_) {
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((10 * i + 5) & 255);
  }
  ImageView view() const { return ImageView::chw(px.data(), c, h, w); }
  float value(int ch, int y, int x) const { return px[(ch * h + y) * w + x] / 255.0f; }
};

std::vector<float> run(const Transform& t, const ImageView& v, uint64_t index,
                       Shape* shape = nullptr) {
  Shape s = t.output_shape(v.channels, v.height, v.width, "test");
  if (shape) *shape = s;
  std::vector<float> out(static_cast<size_t>(s.numel()));
  SampleRng rng(7, 0, index);
  t.apply(v, rng, out.data());
  return out;
}

TEST(Transform, NoneScalesTo01) {
  TestImage img(2, 3, 4);
  Shape s;
  std::vector<float> out = run(Transform(), img.view(), 0, &s);
  EXPECT_EQ(s, Shape({2, 3, 4}));
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 4; ++x) EXPECT_EQ(out[(c * 3 + y) * 4 + x], img.value(c, y, x));
}

TEST(Transform, HorizontalFlipMirrorsRows) {
  TestImage img(2, 3, 4);
  std::vector<float> out = run(Transform().horizontal_flip(1.0f), img.view(), 0);
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 4; ++x) EXPECT_EQ(out[(c * 3 + y) * 4 + x], img.value(c, y, 3 - x));
  // Probability 0.5 flips some samples and not others.
  int flipped = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    std::vector<float> o = run(Transform().horizontal_flip(0.5f), img.view(), i);
    flipped += o[0] == img.value(0, 0, 3);
  }
  EXPECT_GT(flipped, 60);
  EXPECT_LT(flipped, 140);
}

TEST(Transform, NormalizeKnownValues) {
  std::vector<uint8_t> px = {0, 255, 51, 0, 255, 102};  // 2 channels x 1 x 3, planar
  ImageView v = ImageView::chw(px.data(), 2, 1, 3);
  Transform t;
  t.normalize({{0.5f, 0.2f}, {0.25f, 0.4f}});
  std::vector<float> out = run(t, v, 0);
  EXPECT_FLOAT_EQ(out[0], -2.0f);  // (0 - 0.5) / 0.25
  EXPECT_FLOAT_EQ(out[1], 2.0f);   // (1 - 0.5) / 0.25
  EXPECT_FLOAT_EQ(out[2], (0.2f - 0.5f) / 0.25f);
  EXPECT_FLOAT_EQ(out[3], -0.5f);  // (0 - 0.2) / 0.4
  EXPECT_FLOAT_EQ(out[4], 2.0f);   // (1 - 0.2) / 0.4
  EXPECT_FLOAT_EQ(out[5], (0.4f - 0.2f) / 0.4f);
  EXPECT_THROW(t.output_shape(3, 1, 3, "test"), Error);  // 2 means for 3 channels
}

TEST(Transform, RandomCropIsAWindowOfThePaddedImage) {
  // 1 x 4 x 5 image, crop 4 with padding 2: offsets (dy, dx) in [0, 4] x [0, 5].
  TestImage img(1, 4, 5);
  Transform t;
  t.random_crop(4, 2);
  std::set<std::pair<int, int>> seen;
  for (uint64_t i = 0; i < 400; ++i) {
    std::vector<float> out = run(t, img.view(), i);
    int matches = 0;
    for (int dy = 0; dy <= 4; ++dy) {
      for (int dx = 0; dx <= 5; ++dx) {
        bool same = true;
        for (int y = 0; y < 4 && same; ++y) {
          for (int x = 0; x < 4 && same; ++x) {
            int sy = dy + y - 2, sx = dx + x - 2;
            bool inside = sy >= 0 && sy < 4 && sx >= 0 && sx < 5;
            // Padding is pixel value 0, as torchvision pads before ToTensor.
            same = out[y * 4 + x] == (inside ? img.value(0, sy, sx) : 0.0f);
          }
        }
        if (same) {
          ++matches;
          seen.insert({dy, dx});
        }
      }
    }
    ASSERT_EQ(matches, 1) << "sample " << i;
  }
  EXPECT_EQ(seen.size(), 30u) << "every offset should occur";
}

TEST(Transform, PaddingTakesTheNormalisedZero) {
  std::vector<uint8_t> px(3 * 2 * 2, 255);
  ImageView v = ImageView::chw(px.data(), 3, 2, 2);
  Transform t;
  t.random_crop(2, 2).normalize({{0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}});
  int pads = 0;
  for (uint64_t i = 0; i < 50; ++i) {
    for (float f : run(t, v, i)) {
      EXPECT_TRUE(f == 1.0f || f == -1.0f) << f;
      pads += f == -1.0f;
    }
  }
  EXPECT_GT(pads, 0);
}

TEST(Transform, RandomnessIsAFunctionOfSeedEpochIndex) {
  TestImage img(3, 8, 8);
  Transform t;
  t.random_crop(6, 1).horizontal_flip();
  Shape s = t.output_shape(3, 8, 8, "test");
  auto draw = [&](uint64_t seed, uint64_t epoch, uint64_t index) {
    std::vector<float> out(static_cast<size_t>(s.numel()));
    SampleRng rng(seed, epoch, index);
    t.apply(img.view(), rng, out.data());
    return out;
  };
  EXPECT_EQ(draw(1, 2, 3), draw(1, 2, 3));
  int differ = 0;
  for (uint64_t i = 0; i < 20; ++i) {
    differ += draw(1, 2, i) != draw(1, 3, i);
    differ += draw(1, 2, i) != draw(2, 2, i);
  }
  EXPECT_GT(differ, 20);
}

TEST(Transform, BilinearUpscaleKnownValues) {
  // 1 x 2 x 2 image [[0, 200], [0, 200]] to 4 x 4: rows are 0, 50, 150, 200 (pixel
  // centres at -0.25, 0.25, 0.75, 1.25 in source pixels, edges clamped).
  std::vector<uint8_t> px = {0, 200, 0, 200};
  ImageView v = ImageView::chw(px.data(), 1, 2, 2);
  Transform t;
  t.resize_center_crop(4, 4);
  std::vector<float> out = run(t, v, 0);
  const float want[4] = {0, 50, 150, 200};
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x)
      EXPECT_NEAR(out[y * 4 + x] * 255.0f, want[x], 1.0f) << y << "," << x;
}

TEST(Transform, ResizeAtSameSizeIsIdentityForBothLayouts) {
  TestImage img(3, 6, 6);
  std::vector<float> planar = run(Transform().resize_center_crop(6, 6), img.view(), 0);
  // The same image interleaved (HWC), as stb_image returns it.
  std::vector<uint8_t> hwc(img.px.size());
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 36; ++i) hwc[i * 3 + c] = img.px[c * 36 + i];
  std::vector<float> inter =
      run(Transform().resize_center_crop(6, 6), ImageView::hwc(hwc.data(), 3, 6, 6), 0);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 6; ++y)
      for (int x = 0; x < 6; ++x) {
        EXPECT_EQ(planar[(c * 6 + y) * 6 + x], img.value(c, y, x));
        EXPECT_EQ(inter[(c * 6 + y) * 6 + x], img.value(c, y, x));
      }
}

TEST(Transform, ResizeCenterCropTakesTheMiddle) {
  // 1 x 4 x 8: Resize(4) keeps it, CenterCrop(4) takes columns 2..5.
  TestImage img(1, 4, 8);
  std::vector<float> out = run(Transform().resize_center_crop(4, 4), img.view(), 0);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) EXPECT_EQ(out[y * 4 + x], img.value(0, y, x + 2));
}

TEST(Transform, RandomResizedCropShapeAndConstantImage) {
  std::vector<uint8_t> px(3 * 30 * 50);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i % 3 == 0 ? 40 : 200);
  ImageView v = ImageView::hwc(px.data(), 3, 30, 50);  // R = 40, G = B = 200
  Transform t;
  t.random_resized_crop(16).horizontal_flip();
  Shape s;
  for (uint64_t i = 0; i < 20; ++i) {
    std::vector<float> out = run(t, v, i, &s);
    ASSERT_EQ(s, Shape({3, 16, 16}));
    for (int k = 0; k < 256; ++k) {
      ASSERT_EQ(out[k], 40 / 255.0f);
      ASSERT_EQ(out[256 + k], 200 / 255.0f);
    }
  }
  // scale 1 and ratio 1 on a square image: the whole image, unchanged.
  TestImage sq(1, 8, 8);
  std::vector<float> whole =
      run(Transform().random_resized_crop(8, 1.0f, 1.0f, 1.0f, 1.0f), sq.view(), 3);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x) EXPECT_EQ(whole[y * 8 + x], sq.value(0, y, x));
}

TEST(Transform, BadParametersThrow) {
  EXPECT_THROW(Transform().random_crop(0, 1), Error);
  EXPECT_THROW(Transform().resize_center_crop(100, 224), Error);
  EXPECT_THROW(Transform().random_resized_crop(10, 0.5f, 0.2f), Error);
  EXPECT_THROW(Transform().horizontal_flip(2.0f), Error);
  EXPECT_THROW(Transform().normalize({{0.5f}, {0.0f}}), Error);
  EXPECT_THROW(Transform().output_shape(3, 0, 0, "folder"), Error);  // sizes vary, none fixed
  EXPECT_THROW(Transform().random_crop(40, 2).output_shape(3, 32, 32, "x"), Error);
}

}  // namespace
}  // namespace st::test
