// Bad input: every missing, truncated or corrupt file gives an st::Error that names
// the file and says what is wrong.
#include <gtest/gtest.h>

#include "data/cifar.h"
#include "data/file_io.h"
#include "data/image_decode.h"
#include "data/image_folder.h"
#include "data/jpeg_decode.h"
#include "data/loader.h"
#include "data/mnist.h"
#include "data/packed.h"
#include "data/registry.h"
#include "data_files.h"

namespace st::test {
namespace {

// Runs fn, expects st::Error, and checks the message holds every one of `parts`.
template <typename Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error mentioning " << parts[0];
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "missing '" << p << "' in: " << e.what();
  }
}

std::vector<uint8_t> mnist_images(int n) {
  return idx_bytes({uint32_t(n), 28, 28}, std::vector<uint8_t>(static_cast<size_t>(n) * 784, 7));
}
std::vector<uint8_t> mnist_labels(int n) {
  return idx_bytes({uint32_t(n)}, std::vector<uint8_t>(static_cast<size_t>(n), 3));
}

TEST(DataErrors, MissingFolderNamesTheExpectedFiles) {
  TempDir dir;
  expect_error([&] { MnistDataset(dir / "nowhere", true, Transform(), "fashion-mnist"); },
               {"fashion-mnist", "nowhere", "does not exist", "train-images-idx3-ubyte.gz"});
  expect_error([&] { MnistDataset(dir.path(), false, Transform()); },
               {"missing", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"});
  write_gzip(dir / "t10k-images-idx3-ubyte.gz", mnist_images(2));
  expect_error([&] { MnistDataset(dir.path(), false, Transform()); },
               {"missing t10k-labels-idx1-ubyte.gz"});
  expect_error([&] { CifarDataset(dir.path(), CifarKind::kCifar10, true, Transform()); },
               {"cifar10", "data_batch_1.bin", "data_batch_5.bin", "test_batch.bin"});
  expect_error([&] { CifarDataset(dir.path(), CifarKind::kCifar100, false, Transform()); },
               {"cifar100", "missing test.bin"});
  expect_error([&] { open_imagenet(dir / "imagenet", true, Transform().random_resized_crop(8)); },
               {"imagenet", "does not exist", "train/<class>/*.JPEG"});
  fs::create_directories(dir / "imagenet" / "val");
  expect_error([&] { open_imagenet(dir / "imagenet", true, Transform().random_resized_crop(8)); },
               {"imagenet", "train does not exist"});
  fs::create_directories(dir / "imagenet" / "train" / "n01");
  expect_error([&] { open_imagenet(dir / "imagenet", true, Transform().random_resized_crop(8)); },
               {"hold no images", "n01"});
}

TEST(DataErrors, TruncatedIdxSaysExpectedAndGotBytes) {
  TempDir dir;
  // A complete gzip stream of a file cut after 1000 bytes.
  std::vector<uint8_t> img = mnist_images(60000);
  img.resize(1000);
  write_gzip(dir / "train-images-idx3-ubyte.gz", img);
  write_gzip(dir / "train-labels-idx1-ubyte.gz", mnist_labels(60000));
  expect_error([&] { MnistDataset(dir.path(), true, Transform()); },
               {"train-images-idx3-ubyte.gz: expected 47040016 bytes, got 1000"});
}

TEST(DataErrors, CutGzipStreamAndCorruptGzip) {
  TempDir dir;
  // Varied pixels, so the compressed stream is long enough to cut in the middle.
  std::vector<uint8_t> px(50 * 784);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 31 % 251);
  write_gzip(dir / "full.gz", idx_bytes({50, 28, 28}, px));
  std::vector<uint8_t> gz = read_file(dir / "full.gz");
  // The .gz file itself cut in half: zlib reports an early end.
  write_bytes(dir / "train-images-idx3-ubyte.gz", {gz.begin(), gz.begin() + gz.size() / 2});
  write_gzip(dir / "train-labels-idx1-ubyte.gz", mnist_labels(50));
  expect_error([&] { MnistDataset(dir.path(), true, Transform()); },
               {"train-images-idx3-ubyte.gz: expected 39216 bytes, got", "unexpected end of file"});
  // Bytes scrambled inside the deflate data.
  for (size_t i = 20; i < gz.size() - 20; i += 7) gz[i] ^= 0x5a;
  write_bytes(dir / "train-images-idx3-ubyte.gz", gz);
  expect_error([&] { MnistDataset(dir.path(), true, Transform()); },
               {"train-images-idx3-ubyte.gz"});
}

TEST(DataErrors, BadIdxHeaderAndMismatchedCounts) {
  TempDir dir;
  std::vector<uint8_t> bad = mnist_images(5);
  bad[3] = 1;  // rank 1 where images need 3
  write_gzip(dir / "train-images-idx3-ubyte.gz", bad);
  write_gzip(dir / "train-labels-idx1-ubyte.gz", mnist_labels(5));
  expect_error([&] { MnistDataset(dir.path(), true, Transform()); },
               {"train-images-idx3-ubyte.gz: bad magic number 0x00000801, expected 0x00000803"});
  write_gzip(dir / "train-images-idx3-ubyte.gz", mnist_images(5));
  write_gzip(dir / "train-labels-idx1-ubyte.gz", mnist_labels(4));
  expect_error([&] { MnistDataset(dir.path(), true, Transform()); },
               {"has 5 images but", "train-labels-idx1-ubyte.gz has 4 labels"});
  std::vector<uint8_t> labels = mnist_labels(5);
  labels.back() = 10;
  write_gzip(dir / "train-labels-idx1-ubyte.gz", labels);
  expect_error([&] { MnistDataset(dir.path(), true, Transform()); },
               {"train-labels-idx1-ubyte.gz: label 10 of example 4 is outside [0, 10)"});
  // Extra bytes after the declared payload.
  std::vector<uint8_t> longer = mnist_labels(5);
  longer.push_back(1);
  write_gzip(dir / "train-labels-idx1-ubyte.gz", longer);
  expect_error([&] { MnistDataset(dir.path(), true, Transform()); },
               {"train-labels-idx1-ubyte.gz: expected 13 bytes, but the file holds more"});
}

TEST(DataErrors, TruncatedOrBadCifarRecords) {
  TempDir dir;
  std::vector<uint8_t> rec(3074 * 3, 1);
  write_bytes(dir / "test.bin", std::vector<uint8_t>(rec.begin(), rec.end() - 500));
  expect_error(
      [&] {
        CifarDataset(dir.path(), CifarKind::kCifar100, false, Transform(),
                     {.official_sizes = false});
      },
      {"test.bin: expected a whole number of 3074-byte records, got 8722 bytes"});
  rec[3074] = 1;
  rec[3075] = 100;  // fine label out of range in record 1
  write_bytes(dir / "test.bin", rec);
  expect_error(
      [&] {
        CifarDataset(dir.path(), CifarKind::kCifar100, false, Transform(),
                     {.official_sizes = false});
      },
      {"test.bin: record 1 has coarse label 1 and fine label 100"});
}

TEST(DataErrors, CorruptJpegThroughTheLoaderNamesTheFile) {
  TempDir dir;
  const uint8_t c[3] = {9, 9, 9};
  write_jpeg(dir / "train" / "n01" / "good.JPEG", 16, 16, 3, c);
  write_bytes(dir / "train" / "n01" / "broken.JPEG", {0xff, 0xd8, 0xff, 0xe0, 1, 2, 3});
  Transform t;
  t.resize_center_crop(8, 8);
  auto ds = open_imagenet(dir.path(), true, t);
  ASSERT_EQ(ds->size(), 2);  // broken.JPEG sorts first
  DataLoader loader(ds, DistributedSampler(2, {.shuffle = false}), {.batch_size = 1, .workers = 2});
  loader.start_epoch(0);
  expect_error([&] { loader.next(); }, {"broken.JPEG", "cannot decode image", "batch 0"});
  std::optional<Batch> b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->index, 1);
}

// A 16x16 JPEG whose frame header (SOF0) claims 30000 x 30000 pixels.
std::vector<uint8_t> jpeg_claiming_huge_size(const fs::path& scratch) {
  const uint8_t c[3] = {9, 9, 9};
  write_jpeg(scratch, 16, 16, 3, c);
  std::vector<uint8_t> bytes = read_file(scratch);
  for (size_t i = 2; i + 9 < bytes.size(); ++i) {
    if (bytes[i] != 0xff || bytes[i + 1] != 0xc0) continue;
    for (size_t at : {i + 5, i + 7}) {  // height, then width, big-endian
      bytes[at] = 30000 >> 8;
      bytes[at + 1] = 30000 & 0xff;
    }
    return bytes;
  }
  ADD_FAILURE() << "no SOF0 marker in the test JPEG";
  return bytes;
}

TEST(DataErrors, JpegHeaderOverThePixelLimitIsRefusedBeforeDecoding) {
  TempDir dir;
  const std::vector<uint8_t> huge = jpeg_claiming_huge_size(dir / "scratch.jpg");
  const std::vector<std::string> parts = {"big.JPEG", "30000 x 30000", "exceeds the limit"};
  expect_error([&] { decode_rgb(huge, dir / "big.JPEG"); }, parts);
  expect_error([&] { jpeg_size(huge, dir / "big.JPEG"); }, parts);
  // The training path (a resampling transform decodes only the crop) and `pack`.
  write_bytes(dir / "in" / "train" / "n01" / "big.JPEG", huge);
  Transform t;
  t.random_resized_crop(8);
  ImageFolderDataset ds(dir / "in" / "train", t);
  std::vector<float> out(3 * 8 * 8);
  SampleRng rng(0, 0, 0);
  expect_error([&] { ds.get_into(0, rng, out.data()); }, parts);
  expect_error([&] { pack_imagenet(dir / "in", dir / "out", {.side = 8, .threads = 1}); }, parts);
}

TEST(DataErrors, DanglingSymlinkInAnImageTreeIsReported) {
  TempDir dir;
  const uint8_t c[3] = {9, 9, 9};
  write_jpeg(dir / "train" / "n01" / "good.JPEG", 16, 16, 3, c);
  Transform t;
  t.resize_center_crop(8, 8);
  fs::create_directory_symlink(dir / "gone", dir / "train" / "n01" / "more");
  expect_error([&] { ImageFolderDataset ds(dir / "train", t); },
               {(dir / "train" / "n01" / "more").string(), "symbolic link", "does not exist"});
  fs::remove(dir / "train" / "n01" / "more");
  fs::create_symlink(dir / "gone.JPEG", dir / "train" / "n01" / "lost.JPEG");
  expect_error([&] { ImageFolderDataset ds(dir / "train", t); },
               {"lost.JPEG", "gone.JPEG", "does not exist"});
  fs::remove(dir / "train" / "n01" / "lost.JPEG");
  // A class folder that is a dangling link.
  fs::create_directory_symlink(dir / "elsewhere", dir / "train" / "n02");
  expect_error([&] { open_imagenet(dir.path(), true, t); },
               {(dir / "train" / "n02").string(), "does not exist"});
  fs::remove(dir / "train" / "n02");
  EXPECT_EQ(ImageFolderDataset(dir / "train", t).size(), 1);
}

TEST(DataErrors, UnknownDatasetListsValidOnes) {
  expect_error([] { open_dataset({.name = "cifar11"}); },
               {"unknown dataset 'cifar11'", "cifar10", "fashion-mnist", "synthetic"});
}

}  // namespace
}  // namespace st::test
