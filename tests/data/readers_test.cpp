// Dataset readers on files written in the official formats, and on the real
// Fashion-MNIST files when the Debian package is installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "data/cifar.h"
#include "data/image_folder.h"
#include "data/mnist.h"
#include "data/registry.h"
#include "data/synthetic.h"
#include "data_files.h"

namespace st::test {
namespace {

// CIFAR record r of file f gets global image number i = f * per_file + r.
std::vector<uint8_t> cifar_file(CifarKind kind, int64_t first, int records) {
  std::vector<uint8_t> out;
  for (int r = 0; r < records; ++r) {
    int64_t i = first + r;
    if (kind == CifarKind::kCifar100) out.push_back(static_cast<uint8_t>(i % 20));  // coarse
    out.push_back(static_cast<uint8_t>(kind == CifarKind::kCifar10 ? i % 10 : 99 - i % 100));
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) out.push_back(pattern_pixel(i, c, y, x));
  }
  return out;
}

void expect_pattern(const RawImage& img, int64_t i, int channels, int h, int w) {
  ASSERT_EQ(img.view.channels, channels);
  ASSERT_EQ(img.view.height, h);
  ASSERT_EQ(img.view.width, w);
  for (int c = 0; c < channels; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        ASSERT_EQ(img.view.at(c, y, x), pattern_pixel(i, c, y, x)) << i << " " << c << y << x;
}

TEST(Cifar, Cifar10TrainAndTestInFileOrder) {
  TempDir dir;
  for (int f = 0; f < 5; ++f)
    write_bytes(dir / ("data_batch_" + std::to_string(f + 1) + ".bin"),
                cifar_file(CifarKind::kCifar10, f * 3, 3));
  write_bytes(dir / "test_batch.bin", cifar_file(CifarKind::kCifar10, 100, 4));
  CifarDataset train(dir.path(), CifarKind::kCifar10, true, Transform(), {.official_sizes = false});
  CifarDataset test(dir.path(), CifarKind::kCifar10, false, Transform(), {.official_sizes = false});
  ASSERT_EQ(train.size(), 15);
  ASSERT_EQ(test.size(), 4);
  EXPECT_EQ(train.num_classes(), 10);
  EXPECT_EQ(train.example_shape(), Shape({3, 32, 32}));
  for (int64_t i = 0; i < 15; ++i) {
    RawImage img = train.load(i);
    EXPECT_EQ(img.label, i % 10);
    expect_pattern(img, i, 3, 32, 32);
  }
  expect_pattern(test.load(2), 102, 3, 32, 32);
  // get() = pixels / 255 in CHW with no transform.
  SampleRng rng(0, 0, 7);
  Example e = train.get(7, rng);
  EXPECT_EQ(e.label, 7);
  EXPECT_EQ(e.image.f32()[2 * 1024 + 5 * 32 + 9], pattern_pixel(7, 2, 5, 9) / 255.0f);
}

TEST(Cifar, Cifar100UsesTheFineLabel) {
  TempDir dir;
  fs::path sub = dir / "cifar-100-binary";  // the folder the official archive unpacks to
  write_bytes(sub / "train.bin", cifar_file(CifarKind::kCifar100, 0, 5));
  write_bytes(sub / "test.bin", cifar_file(CifarKind::kCifar100, 50, 2));
  CifarDataset train(dir.path(), CifarKind::kCifar100, true, Transform(),
                     {.official_sizes = false});
  CifarDataset test(dir.path(), CifarKind::kCifar100, false, Transform(),
                    {.official_sizes = false});
  ASSERT_EQ(train.size(), 5);
  ASSERT_EQ(test.size(), 2);
  EXPECT_EQ(train.num_classes(), 100);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(train.load(i).label, 99 - i);
    expect_pattern(train.load(i), i, 3, 32, 32);
  }
  EXPECT_EQ(test.load(1).label, 99 - 51);
}

TEST(Cifar, OfficialSizesAreCheckedByDefault) {
  TempDir dir;
  for (int f = 1; f <= 5; ++f)
    write_bytes(dir / ("data_batch_" + std::to_string(f) + ".bin"),
                cifar_file(CifarKind::kCifar10, 0, 2));
  try {
    CifarDataset ds(dir.path(), CifarKind::kCifar10, true, Transform());
    FAIL() << "small files must not pass as the official CIFAR-10";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data_batch_1.bin: expected 30730000 bytes (10000 records "
                                         "of 3073), got 6146"),
              std::string::npos)
        << e.what();
  }
}

// Writes an MNIST-format split of n images of rows x cols with labels i % 10.
void write_mnist(const fs::path& dir, const std::string& prefix, int n, int rows, int cols,
                 bool gz) {
  std::vector<uint8_t> px, labels;
  for (int i = 0; i < n; ++i) {
    labels.push_back(static_cast<uint8_t>(i % 10));
    for (int y = 0; y < rows; ++y)
      for (int x = 0; x < cols; ++x) px.push_back(pattern_pixel(i, 0, y, x));
  }
  auto img = idx_bytes({uint32_t(n), uint32_t(rows), uint32_t(cols)}, px);
  auto lbl = idx_bytes({uint32_t(n)}, labels);
  fs::create_directories(dir);
  if (gz) {
    write_gzip(dir / (prefix + "-images-idx3-ubyte.gz"), img);
    write_gzip(dir / (prefix + "-labels-idx1-ubyte.gz"), lbl);
  } else {
    write_bytes(dir / (prefix + "-images-idx3-ubyte"), img);
    write_bytes(dir / (prefix + "-labels-idx1-ubyte"), lbl);
  }
}

TEST(Mnist, ReadsGzipAndPlainIdx) {
  TempDir dir;
  write_mnist(dir.path(), "train", 12, 28, 28, true);
  write_mnist(dir.path(), "t10k", 3, 28, 28, false);
  MnistDataset train(dir.path(), true, Transform(), "fashion-mnist");
  MnistDataset test(dir.path(), false, Transform());
  ASSERT_EQ(train.size(), 12);
  ASSERT_EQ(test.size(), 3);
  EXPECT_EQ(train.example_shape(), Shape({1, 28, 28}));
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(train.load(i).label, i % 10);
    expect_pattern(train.load(i), i, 1, 28, 28);
  }
  expect_pattern(test.load(2), 2, 1, 28, 28);
  EXPECT_NE(train.name().find("fashion-mnist train"), std::string::npos);
}

TEST(Mnist, RealFashionMnist) {
  const fs::path dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)";
  auto train = open_dataset({.name = "fashion-mnist", .dir = dir, .train = true, .augment = false});
  auto test = open_dataset({.name = "fashion-mnist", .dir = dir, .train = false});
  ASSERT_EQ(train->size(), 60000);
  ASSERT_EQ(test->size(), 10000);
  EXPECT_EQ(train->example_shape(), Shape({1, 28, 28}));
  // Known facts of the release: balanced classes, first labels 9 (ankle boot) and 0.
  std::vector<int> counts(10);
  SampleRng rng(0, 0, 0);
  std::vector<float> img(28 * 28);
  for (int64_t i = 0; i < train->size(); i += 1) counts[train->get_into(i, rng, img.data())]++;
  for (int c : counts) EXPECT_EQ(c, 6000);
  auto& raw = dynamic_cast<const MnistDataset&>(*train);
  EXPECT_EQ(raw.load(0).label, 9);
  EXPECT_EQ(raw.load(1).label, 0);
  int sum = 0;
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x) sum += raw.load(0).view.at(0, y, x);
  EXPECT_EQ(sum, 76247);  // pixel sum of the first training image
}

class ImageFolderTest : public ::testing::Test {
 protected:
  // Classes written out of order; files of varying size; one grayscale image; a nested
  // folder; a README that is not an image.
  void SetUp() override {
    const uint8_t red[3] = {200, 30, 30}, green[3] = {20, 180, 40}, blue[3] = {10, 20, 220};
    const uint8_t gray[1] = {128};
    for (const char* split : {"train", "val"}) {
      fs::path s = dir_ / split;
      write_jpeg(s / "n02_dog" / "b.JPEG", 40, 30, 3, green);
      write_jpeg(s / "n02_dog" / "a.JPEG", 64, 48, 3, green);
      write_jpeg(s / "n01_cat" / "x.JPEG", 33, 50, 3, red);
      write_jpeg(s / "n03_ant" / "sub" / "g.jpg", 36, 36, 1, gray);
      write_jpeg(s / "n03_ant" / "z.JPEG", 50, 50, 3, blue);
      write_bytes(s / "n03_ant" / "README.txt", {'h', 'i'});
    }
  }
  TempDir dir_;
};

TEST_F(ImageFolderTest, ClassesSortedAndImagesDecoded) {
  Transform t;
  t.resize_center_crop(32, 28);
  auto train = open_imagenet(dir_.path(), true, t);
  ASSERT_EQ(train->classes(), (std::vector<std::string>{"n01_cat", "n02_dog", "n03_ant"}));
  ASSERT_EQ(train->size(), 5);
  EXPECT_EQ(train->example_shape(), Shape({3, 28, 28}));
  // Sorted by class, then by path within the class.
  EXPECT_EQ(train->file(1).filename(), "a.JPEG");
  EXPECT_EQ(train->file(2).filename(), "b.JPEG");
  EXPECT_EQ(train->file(3).filename(), "g.jpg");
  const int want_label[5] = {0, 1, 1, 2, 2};
  const int want_color[5][3] = {
      {200, 30, 30}, {20, 180, 40}, {20, 180, 40}, {128, 128, 128}, {10, 20, 220}};
  for (int64_t i = 0; i < 5; ++i) {
    RawImage raw = train->load(i);
    EXPECT_EQ(raw.label, want_label[i]);
    EXPECT_EQ(raw.view.channels, 3);
    SampleRng rng(1, 0, i);
    Example e = train->get(i, rng);
    EXPECT_EQ(e.label, want_label[i]);
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 28 * 28; p += 37)  // JPEG is lossy: within a few levels
        ASSERT_NEAR(e.image.f32()[c * 784 + p] * 255.0f, want_color[i][c], 4.0f) << i;
  }
  EXPECT_EQ(train->load(0).view.width, 33);
  EXPECT_EQ(train->load(0).view.height, 50);
  auto val = open_imagenet(dir_.path(), false, t);
  EXPECT_EQ(val->size(), 5);
}

TEST_F(ImageFolderTest, SplitsMustAgreeOnClasses) {
  const uint8_t c[3] = {1, 2, 3};
  write_jpeg(dir_ / "val" / "n04_extra" / "e.JPEG", 8, 8, 3, c);
  Transform t;
  t.random_resized_crop(16);
  try {
    open_imagenet(dir_.path(), true, t);
    FAIL() << "class lists differ";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n04_extra"), std::string::npos) << e.what();
  }
}

TEST(Synthetic, DeterministicAndLearnable) {
  SyntheticDataset a(100, Shape({3, 8, 8}), 10, 42), b(100, Shape({3, 8, 8}), 10, 42);
  SyntheticDataset other(100, Shape({3, 8, 8}), 10, 43);
  SampleRng rng(0, 0, 0);
  std::vector<int> counts(10);
  int differ = 0;
  for (int64_t i = 0; i < 100; ++i) {
    Example x = a.get(i, rng), y = b.get(i, rng), z = other.get(i, rng);
    ASSERT_EQ(x.label, y.label);
    ASSERT_EQ(x.image.to_vector(), y.image.to_vector());
    differ += x.image.to_vector() != z.image.to_vector();
    ASSERT_GE(x.label, 0);
    ASSERT_LT(x.label, 10);
    counts[x.label]++;
  }
  EXPECT_EQ(differ, 100);
  for (int c : counts) EXPECT_GT(c, 0);
  auto test = open_dataset({.name = "synthetic", .train = false, .shape = {3, 8, 8}, .size = 5});
  EXPECT_EQ(test->size(), 5);
  EXPECT_NE(test->get(0, rng).image.to_vector(), a.get(0, rng).image.to_vector());
}

}  // namespace
}  // namespace st::test
