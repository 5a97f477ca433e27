// Packed (pre-decoded) image files: a folder packed and read back gives the same images,
// shrunk as torchvision's Resize does, with the same labels and classes; a damaged file
// gives one line naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "data/file_io.h"
#include "data/image_decode.h"
#include "data/packed.h"
#include "data/registry.h"
#include "data_files.h"

namespace st::test {
namespace {

class Packed : public ::testing::Test {
 protected:
  void SetUp() override {
    // 80x60 shrinks to 42x32 (side 32); 20x30 is kept as it is.
    write_jpeg_rgb(dir_ / "in" / "train" / "n01_cat" / "a.JPEG", 80, 60, photo_pixels(80, 60, 1));
    write_jpeg_rgb(dir_ / "in" / "train" / "n02_dog" / "b.jpg", 20, 30, photo_pixels(20, 30, 2));
    write_jpeg_rgb(dir_ / "in" / "val" / "n01_cat" / "c.JPEG", 30, 90, photo_pixels(30, 90, 3));
    fs::create_directories(dir_ / "in" / "val" / "n02_dog");
    write_jpeg_rgb(dir_ / "in" / "val" / "n02_dog" / "d.JPEG", 40, 40, photo_pixels(40, 40, 4));
    summary_ = pack_imagenet(dir_ / "in", dir_ / "out", {.side = 32, .threads = 2});
  }
  Transform crop() const {
    Transform t;
    t.random_resized_crop(16);
    return t;
  }
  TempDir dir_;
  std::string summary_;
};

TEST_F(Packed, RoundTripKeepsLabelsClassesAndResizedPixels) {
  EXPECT_NE(summary_.find("2 images"), std::string::npos) << summary_;
  auto folder = open_imagenet(dir_ / "in", true, crop());
  auto packed = open_packed_imagenet(dir_ / "out", true, crop());
  ASSERT_EQ(packed->size(), 2);
  EXPECT_EQ(packed->classes(), folder->classes());
  EXPECT_EQ(packed->side(), 32);
  const int dims[2][2] = {{32, 42}, {30, 20}};  // height, width
  for (int64_t i = 0; i < 2; ++i) {
    const RawImage p = packed->load(i), f = folder->load(i);
    EXPECT_EQ(p.label, f.label);
    ASSERT_EQ(p.view.height, dims[i][0]);
    ASSERT_EQ(p.view.width, dims[i][1]);
    std::vector<uint8_t> want(3 * static_cast<size_t>(dims[i][0]) * dims[i][1]);
    resize_bilinear(f.view, {0, 0, double(f.view.width), double(f.view.height)}, dims[i][0],
                    dims[i][1], want.data());
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < dims[i][0]; ++y)
        for (int x = 0; x < dims[i][1]; ++x)
          ASSERT_EQ(p.view.at(c, y, x),
                    want[(static_cast<size_t>(c) * dims[i][0] + y) * dims[i][1] + x])
              << i << " " << c << " " << y << " " << x;
  }
  // Through the registry, with the ImageNet transforms.
  auto val = open_dataset(
      {.name = "imagenet-packed", .dir = dir_ / "out", .train = false, .image_size = 16});
  EXPECT_EQ(val->size(), 2);
  EXPECT_EQ(val->example_shape(), Shape({3, 16, 16}));
  SampleRng rng(0, 0, 1);
  EXPECT_EQ(val->get(1, rng).label, 1);
}

TEST_F(Packed, DamagedFileGivesOneLineNamingIt) {
  const fs::path file = dir_ / "out" / "train.stpack";
  const std::vector<uint8_t> good = read_file(file);
  auto expect = [&](const std::vector<uint8_t>& bytes, const std::string& part) {
    const fs::path bad = dir_ / "bad.stpack";
    write_bytes(bad, bytes);
    try {
      PackedDataset ds(bad, crop());
      ADD_FAILURE() << "no error for " << part;
    } catch (const std::exception& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(bad.string()), std::string::npos) << m;
      EXPECT_NE(m.find(part), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  };
  expect({good.begin(), good.end() - 5}, "(truncated?)");
  std::vector<uint8_t> longer = good;
  longer.resize(good.size() + 7, 0);
  expect(longer, "(7 bytes of trailing data)");
  try {
    write_bytes(dir_ / "bad.stpack", longer);
    PackedDataset ds(dir_ / "bad.stpack", crop());
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  expect({good.begin(), good.begin() + 10}, "too short");
  std::vector<uint8_t> magic = good;
  magic[0] = 'X';
  expect(magic, "not a packed image file");
  // Index entry 1's offset points past the pixel data.
  std::vector<uint8_t> index = good;
  uint64_t index_offset = 0;
  std::memcpy(&index_offset, good.data() + 24, 8);
  const uint64_t huge = good.size();
  std::memcpy(index.data() + index_offset + 24, &huge, 8);
  expect(index, "index entry 1");
  // A label beyond the classes.
  std::vector<uint8_t> label = good;
  const int32_t seven = 7;
  std::memcpy(label.data() + index_offset + 16, &seven, 4);
  expect(label, "label 7");
}

TEST_F(Packed, AFileTruncatedWhileARunReadsItGivesOneLineNotSigbus) {
  auto packed = open_packed_imagenet(dir_ / "out", true, crop());
  EXPECT_NO_THROW(packed->load(1));
  fs::resize_file(dir_ / "out" / "train.stpack", 100);  // as `truncate -s 100` does
  try {
    packed->load(1);
    FAIL() << "a truncated pack was read";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("train.stpack is damaged: image 1"), std::string::npos) << what;
    EXPECT_NE(what.find("truncated or replaced while the run read it"), std::string::npos) << what;
  }
}

TEST_F(Packed, ExistingPackFilesAreKeptUnlessOverwriteIsAsked) {
  const fs::path train = dir_ / "out" / "train.stpack", val = dir_ / "out" / "val.stpack";
  const std::vector<uint8_t> before = read_file(train);
  write_bytes(val, {1, 2, 3});  // only one of the two exists: still refused, nothing written
  fs::remove(train);
  try {
    pack_imagenet(dir_ / "in", dir_ / "out", {.side = 16, .threads = 1});
    ADD_FAILURE() << "an existing pack file was replaced";
  } catch (const std::exception& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(val.string() + " already exists"), std::string::npos) << m;
    EXPECT_NE(m.find("--overwrite"), std::string::npos) << m;
  }
  EXPECT_EQ(read_file(val), std::vector<uint8_t>({1, 2, 3}));
  EXPECT_FALSE(fs::exists(train));
  pack_imagenet(dir_ / "in", dir_ / "out", {.side = 32, .threads = 1, .overwrite = true});
  EXPECT_EQ(read_file(train), before);
  EXPECT_EQ(PackedDataset(val, crop()).size(), 2);
}

TEST_F(Packed, MissingFileSaysHowToWriteIt) {
  try {
    open_packed_imagenet(dir_ / "nowhere", true, crop());
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("sparsetrain pack"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace st::test
