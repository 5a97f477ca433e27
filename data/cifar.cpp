#include "data/cifar.h"

#include <fstream>

#include "data/file_io.h"

namespace st {
namespace {

constexpr int kSide = 32, kPixels = 3 * kSide * kSide;

const char* kind_name(CifarKind k) {
  return k == CifarKind::kCifar10 ? "cifar10" : "cifar100";
}

}  // namespace

std::vector<std::string> CifarDataset::file_names(CifarKind kind, bool train) {
  if (kind == CifarKind::kCifar100) return {train ? "train.bin" : "test.bin"};
  if (!train) return {"test_batch.bin"};
  std::vector<std::string> names;
  for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  return names;
}

CifarDataset::CifarDataset(const fs::path& dir, CifarKind kind, bool train, Transform transform,
                           CifarOptions options)
    : ImageDataset(std::move(transform)), kind_(kind), split_(train ? "train" : "test"), dir_(dir) {
  const bool c10 = kind == CifarKind::kCifar10;
  const std::vector<std::string> names = file_names(kind, train);
  // Accept the folder the official archive unpacks to, as well as the files themselves.
  fs::path sub = dir / (c10 ? "cifar-10-batches-bin" : "cifar-100-binary");
  if (!fs::exists(dir / names[0]) && fs::is_directory(sub)) dir_ = sub;
  require_files(kind_name(kind), dir_, names,
                c10 ? "expected data_batch_1..5.bin and test_batch.bin (CIFAR-10 binary version)"
                    : "expected train.bin and test.bin (CIFAR-100 binary version)");

  record_ = (c10 ? 1 : 2) + kPixels;
  const int64_t official = c10 ? 10000 : (train ? 50000 : 10000);
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const std::string& n : names) {
    fs::path p = dir_ / n;
    auto bytes = static_cast<int64_t>(fs::file_size(p));
    if (options.official_sizes) {
      ST_CHECK(bytes == official * record_, p.string(), ": expected ", official * record_,
               " bytes (", official, " records of ", record_, "), got ", bytes);
    } else {
      ST_CHECK(bytes > 0 && bytes % record_ == 0, p.string(), ": expected a whole number of ",
               record_, "-byte records, got ", bytes, " bytes");
    }
    sizes.push_back(bytes);
    total += bytes;
  }
  // Read every file straight into its place in one buffer.
  records_.resize(static_cast<size_t>(total));
  int64_t at = 0;
  for (size_t f = 0; f < names.size(); ++f) {
    fs::path p = dir_ / names[f];
    std::ifstream in(p, std::ios::binary);
    ST_CHECK(in.good(), p.string(), ": cannot open");
    in.read(reinterpret_cast<char*>(records_.data() + at), sizes[f]);
    ST_CHECK(in.gcount() == sizes[f], p.string(), ": read ", in.gcount(), " of ", sizes[f],
             " bytes");
    // Labels: CIFAR-10 in [0, 10); CIFAR-100 coarse in [0, 20), fine in [0, 100).
    for (int64_t r = 0; r < sizes[f] / record_; ++r) {
      const uint8_t* rec = records_.data() + at + r * record_;
      if (c10) {
        ST_CHECK(rec[0] < 10, p.string(), ": record ", r, " has label ", int(rec[0]),
                 ", outside [0, 10)");
      } else {
        ST_CHECK(rec[0] < 20 && rec[1] < 100, p.string(), ": record ", r, " has coarse label ",
                 int(rec[0]), " and fine label ", int(rec[1]), ", outside [0, 20) x [0, 100)");
      }
    }
    at += sizes[f];
  }
  count_ = total / record_;
  set_source_shape(3, kSide, kSide);
}

std::string CifarDataset::name() const {
  return std::string(kind_name(kind_)) + " " + split_ + " (" + dir_.string() + ")";
}

RawImage CifarDataset::load(int64_t index) const {
  check_index(index);
  const uint8_t* rec = records_.data() + index * record_;
  const int label_at = kind_ == CifarKind::kCifar10 ? 0 : 1;
  RawImage r;
  r.view = ImageView::chw(rec + label_at + 1, 3, kSide, kSide);
  r.label = rec[label_at];
  return r;
}

}  // namespace st
