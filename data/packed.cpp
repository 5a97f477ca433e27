#include "data/packed.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include "core/error.h"
#include "core/output_paths.h"
#include "data/resize.h"

namespace st {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'S', 'T', 'P', 'A', 'C', 'K', '1', '\n'};
constexpr uint32_t kVersion = 1;

struct Header {
  char magic[8];
  uint32_t version, channels;
  uint64_t count, index_offset, names_offset, file_size;
  uint32_t num_classes, side;
  uint8_t reserved[8];
};
static_assert(sizeof(Header) == 64);

// One image shrunk so its shorter side is at most `side` (torchvision Resize: the longer
// side scales and truncates), as HWC bytes.
std::vector<uint8_t> shrink(const ImageView& v, int side, int& h, int& w) {
  h = v.height;
  w = v.width;
  if (std::min(h, w) > side) {
    if (w <= h) {
      h = static_cast<int>(static_cast<int64_t>(side) * h / w);
      w = side;
    } else {
      w = static_cast<int>(static_cast<int64_t>(side) * w / h);
      h = side;
    }
  }
  const size_t plane = static_cast<size_t>(h) * w;
  std::vector<uint8_t> chw(plane * 3), hwc(plane * 3);
  resize_bilinear(v, Box{0, 0, double(v.width), double(v.height)}, h, w, chw.data());
  for (size_t p = 0; p < plane; ++p)
    for (size_t c = 0; c < 3; ++c) hwc[p * 3 + c] = chw[c * plane + p];
  return hwc;
}

}  // namespace

struct PackedDataset::Entry {
  uint64_t offset;
  uint32_t height, width;
  int32_t label;
  uint32_t reserved;
};
static_assert(sizeof(PackedDataset::Entry) == 24);

namespace {
void check_pack_options(const PackOptions& opt) {
  ST_CHECK(opt.side > 0, "pack: --pack-size must be > 0, got ", opt.side);
  ST_CHECK(opt.threads > 0, "pack: --workers must be > 0, got ", opt.threads);
}
}  // namespace

int64_t pack_image_folder(const ImageFolderDataset& folder, const fs::path& out,
                          const PackOptions& opt) {
  check_pack_options(opt);
  const fs::path tmp = out.string() + ".tmp";
  // A failure (a bad image, a full disk) leaves no partial file behind.
  struct RemoveOnFailure {
    const fs::path& path;
    bool done = false;
    ~RemoveOnFailure() {
      std::error_code ec;
      if (!done) fs::remove(path, ec);
    }
  } cleanup{tmp};
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  ST_CHECK(f.good(), tmp.string(), ": cannot create (", std::strerror(errno), ")");
  Header h{};
  f.write(reinterpret_cast<const char*>(&h), sizeof h);  // the real one comes last
  std::vector<PackedDataset::Entry> index;
  const int64_t n = folder.size(), chunk = 64L * opt.threads;
  std::vector<std::vector<uint8_t>> px(static_cast<size_t>(chunk));
  struct Meta {
    int h = 0, w = 0;
    int32_t label = 0;
  };
  std::vector<Meta> meta(static_cast<size_t>(chunk));
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk);
    // Threads decode interleaved slots of the chunk; the first error wins.
    std::vector<std::exception_ptr> errors(static_cast<size_t>(opt.threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < opt.threads; ++t) {
      pool.emplace_back([&, t] {
        try {
          for (int64_t i = begin + t; i < end; i += opt.threads) {
            Meta& m = meta[static_cast<size_t>(i - begin)];
            const RawImage img = folder.load(i);
            m.label = img.label;
            px[static_cast<size_t>(i - begin)] = shrink(img.view, opt.side, m.h, m.w);
          }
        } catch (...) {
          errors[static_cast<size_t>(t)] = std::current_exception();
        }
      });
    }
    for (std::thread& t : pool) t.join();
    for (std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
    for (int64_t i = begin; i < end; ++i) {
      const auto& p = px[static_cast<size_t>(i - begin)];
      const Meta& m = meta[static_cast<size_t>(i - begin)];
      index.push_back({static_cast<uint64_t>(f.tellp()), static_cast<uint32_t>(m.h),
                       static_cast<uint32_t>(m.w), m.label, 0});
      f.write(reinterpret_cast<const char*>(p.data()), static_cast<std::streamsize>(p.size()));
    }
  }
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.channels = 3;
  h.count = static_cast<uint64_t>(n);
  h.index_offset = static_cast<uint64_t>(f.tellp());
  f.write(reinterpret_cast<const char*>(index.data()),
          static_cast<std::streamsize>(index.size() * sizeof(PackedDataset::Entry)));
  h.names_offset = static_cast<uint64_t>(f.tellp());
  for (const std::string& c : folder.classes()) f << c << '\n';
  h.file_size = static_cast<uint64_t>(f.tellp());
  h.num_classes = static_cast<uint32_t>(folder.classes().size());
  h.side = static_cast<uint32_t>(opt.side);
  f.seekp(0);
  f.write(reinterpret_cast<const char*>(&h), sizeof h);
  f.close();
  ST_CHECK(f.good(), tmp.string(), ": write failed (", std::strerror(errno), ")");
  fs::rename(tmp, out);
  cleanup.done = true;
  return static_cast<int64_t>(h.file_size);
}

std::string pack_imagenet(const fs::path& root, const fs::path& out_dir, const PackOptions& opt) {
  check_pack_options(opt);  // before the folders are scanned
  check_output_folder("pack --out", out_dir.string(), {"train.stpack", "val.stpack"});
  for (const char* split : {"train", "val"}) {
    const fs::path out = out_dir / (std::string(split) + ".stpack");
    ST_CHECK(opt.overwrite || !fs::is_directory(root / split) || !fs::exists(out),
             "pack: ", out.string(), " already exists; pass --overwrite to replace it");
  }
  std::string summary;
  fs::create_directories(out_dir);
  for (const bool train : {true, false}) {
    const char* split = train ? "train" : "val";
    if (!fs::is_directory(root / split)) continue;
    // Any resampling transform will do: the folder only needs a fixed output size.
    Transform t;
    t.resize_center_crop(1, 1);
    auto folder = open_imagenet(root, train, t);
    const fs::path out = out_dir / (std::string(split) + ".stpack");
    const int64_t bytes = pack_image_folder(*folder, out, opt);
    summary += "pack: " + std::to_string(folder->size()) + " images of " + folder->name() + " -> " +
               out.string() + " (" + std::to_string(bytes >> 20) + " MiB)\n";
  }
  ST_CHECK(!summary.empty(), "pack: neither ", (root / "train").string(), " nor ",
           (root / "val").string(), " exists");
  return summary;
}

PackedDataset::PackedDataset(const fs::path& file, Transform transform, std::string who)
    : ImageDataset(std::move(transform)), who_(std::move(who)), file_(file) {
  const std::string f = file.string();
  const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
  ST_CHECK(fd >= 0, who_, ": cannot open ", f, " (", std::strerror(errno), ")");
  // Images are read with pread, not through a mapping: a file truncated or replaced while
  // the run reads it then gives a short read and one line, where a mapping gives SIGBUS.
  fd_ = std::shared_ptr<const int>(new int(fd), [](const int* d) {
    ::close(*d);
    delete d;
  });
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const size_t bytes = stat_ok ? static_cast<size_t>(st.st_size) : 0;
  void* p =
      bytes >= sizeof(Header) ? ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int map_errno = errno;
  ST_CHECK(bytes >= sizeof(Header), who_, ": ", f, " is ", bytes,
           " bytes, too short for a packed image file");
  ST_CHECK(p != MAP_FAILED, who_, ": cannot map ", f, " (", std::strerror(map_errno), ")");
  // The header, the index and the class names, read once here.
  const std::unique_ptr<const uint8_t, std::function<void(const uint8_t*)>> map(
      static_cast<const uint8_t*>(p),
      [bytes](const uint8_t* q) { ::munmap(const_cast<uint8_t*>(q), bytes); });
  Header h;
  std::memcpy(&h, map.get(), sizeof h);
  const std::string damaged = who_ + ": " + f + " is damaged: ";
  ST_CHECK(std::memcmp(h.magic, kMagic, sizeof kMagic) == 0, who_, ": ", f,
           " is not a packed image file (written by `sparsetrain pack`)");
  ST_CHECK(h.version == kVersion && h.channels == 3, damaged, "version ", h.version, ", ",
           h.channels, " channels (expected version ", kVersion, ", 3 channels)");
  ST_CHECK(h.file_size <= bytes, damaged, "the header says ", h.file_size, " bytes, the file has ",
           bytes, " (truncated?)");
  ST_CHECK(h.file_size == bytes, damaged, "the header says ", h.file_size, " bytes, the file has ",
           bytes, " (", bytes - h.file_size, " bytes of trailing data)");
  ST_CHECK(h.index_offset >= sizeof h && h.count <= (bytes - h.index_offset) / sizeof(Entry) &&
               h.names_offset == h.index_offset + h.count * sizeof(Entry) &&
               h.names_offset <= bytes && h.num_classes > 0,
           damaged, "inconsistent header (", h.count, " images, index at ", h.index_offset,
           ", names at ", h.names_offset, ")");
  {
    Entry* copy = new Entry[h.count > 0 ? h.count : 1];
    std::memcpy(copy, map.get() + h.index_offset, h.count * sizeof(Entry));
    index_storage_ = std::shared_ptr<const Entry>(copy, std::default_delete<Entry[]>());
    index_ = copy;
  }
  count_ = static_cast<int64_t>(h.count);
  side_ = static_cast<int>(h.side);
  for (int64_t i = 0; i < count_; ++i) {
    const Entry& e = index_[i];
    const uint64_t px = uint64_t{e.height} * e.width * 3;
    ST_CHECK(e.height > 0 && e.width > 0 && e.offset >= sizeof h && e.offset <= h.index_offset &&
                 px <= h.index_offset - e.offset && e.label >= 0 &&
                 static_cast<uint32_t>(e.label) < h.num_classes,
             damaged, "index entry ", i, " (", e.width, "x", e.height, " at ", e.offset, ", label ",
             e.label, ") does not fit");
  }
  const char* names = reinterpret_cast<const char*>(map.get() + h.names_offset);
  const std::string all(names, bytes - h.names_offset);
  for (size_t pos = 0; pos < all.size();) {
    const size_t nl = all.find('\n', pos);
    ST_CHECK(nl != std::string::npos, damaged, "class names do not end in a newline");
    classes_.push_back(all.substr(pos, nl - pos));
    pos = nl + 1;
  }
  ST_CHECK(classes_.size() == h.num_classes, damaged, "the header says ", h.num_classes,
           " classes, the file names ", classes_.size());
  set_source_shape(3, 0, 0);
}

std::string PackedDataset::name() const {
  return who_ + " (" + file_.string() + ")";
}

RawImage PackedDataset::load(int64_t index) const {
  check_index(index);
  const Entry& e = index_[index];
  const size_t px = size_t{e.height} * e.width * 3;
  std::shared_ptr<uint8_t[]> pixels(new uint8_t[px]);
  size_t got = 0;
  while (got < px) {
    const ssize_t n =
        ::pread(*fd_, pixels.get() + got, px - got, static_cast<off_t>(e.offset + got));
    if (n < 0 && errno == EINTR) continue;
    ST_CHECK(n > 0, who_, ": ", file_.string(), " is damaged: image ", index, " (", px,
             " bytes at offset ", e.offset, ") cannot be read (",
             n < 0 ? std::strerror(errno) : "the file ends before it",
             "); was it truncated or replaced while the run read it?");
    got += static_cast<size_t>(n);
  }
  RawImage r;
  r.view = ImageView::hwc(pixels.get(), 3, static_cast<int>(e.height), static_cast<int>(e.width));
  r.label = e.label;
  r.owner = std::move(pixels);
  return r;
}

std::shared_ptr<PackedDataset> open_packed_imagenet(const fs::path& dir, bool train,
                                                    Transform transform) {
  const char* split = train ? "train" : "val";
  const fs::path file = dir / (std::string(split) + ".stpack"),
                 other = dir / (train ? "val.stpack" : "train.stpack");
  ST_CHECK(fs::exists(file), "imagenet-packed: ", file.string(),
           " does not exist; write it with `sparsetrain pack --data-dir <imagenet> --out ",
           dir.string(), "`");
  auto ds =
      std::make_shared<PackedDataset>(file, transform, std::string("imagenet-packed ") + split);
  if (fs::exists(other)) {
    PackedDataset theirs(other, transform, "imagenet-packed");
    ST_CHECK(theirs.classes() == ds->classes(), "imagenet-packed: ", file.string(), " has ",
             ds->num_classes(), " classes but ", other.string(), " has ", theirs.num_classes(),
             " or names them differently; labels would not match");
  }
  return ds;
}

}  // namespace st
