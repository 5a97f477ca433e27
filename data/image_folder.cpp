#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <system_error>

#include "data/file_io.h"
#include "data/image_decode.h"
#include "data/jpeg_decode.h"

namespace st {
namespace {

bool is_image(const fs::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".jpeg" || ext == ".jpg" || ext == ".png" || ext == ".bmp" || ext == ".ppm" ||
         ext == ".pgm";
}

// A symbolic link whose target is gone (an unmounted disk, a moved folder) would drop
// images or a whole class silently: refused, naming the link.
void check_not_dangling(const fs::directory_entry& e, const std::string& who) {
  if (!e.is_symlink() || e.exists()) return;
  std::error_code ec;
  const fs::path target = fs::read_symlink(e.path(), ec);
  ST_THROW(who, ": ", e.path().string(), " is a symbolic link to ", target.string(),
           ", which does not exist");
}

std::vector<std::string> class_folders(const fs::path& dir, const std::string& who) {
  std::vector<std::string> classes;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    check_not_dangling(e, who);
    if (e.is_directory()) classes.push_back(e.path().filename().string());
  }
  std::sort(classes.begin(), classes.end());
  return classes;
}

}  // namespace

ImageFolderDataset::ImageFolderDataset(const fs::path& dir, Transform transform, std::string who)
    : ImageDataset(std::move(transform)), who_(std::move(who)), dir_(dir) {
  ST_CHECK(fs::is_directory(dir), who_, ": data folder ", dir.string(),
           " does not exist; expected ", dir.string(), "/<class>/*.JPEG");
  classes_ = class_folders(dir, who_);
  ST_CHECK(!classes_.empty(), who_, ": no class folders in ", dir.string(), "; expected ",
           dir.string(), "/<class>/*.JPEG");
  std::vector<std::string> empty;
  std::vector<std::string> files;
  for (size_t c = 0; c < classes_.size(); ++c) {
    const fs::path cdir = dir / classes_[c];
    files.clear();
    for (const fs::directory_entry& e :
         fs::recursive_directory_iterator(cdir, fs::directory_options::follow_directory_symlink)) {
      check_not_dangling(e, who_);
      if (e.is_regular_file() && is_image(e.path()))
        files.push_back(e.path().lexically_relative(cdir).string());
    }
    if (files.empty()) empty.push_back(classes_[c]);
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      names_ += f;
      name_end_.push_back(names_.size());
      labels_.push_back(static_cast<int32_t>(c));
    }
  }
  if (!empty.empty()) {
    std::string list;
    for (size_t i = 0; i < empty.size() && i < 5; ++i) list += (i ? ", " : "") + empty[i];
    if (empty.size() > 5) list += ", ...";
    ST_THROW(who_, ": ", empty.size(), " class folder(s) in ", dir.string(),
             " hold no images (.JPEG/.jpg/.png): ", list);
  }
  set_source_shape(3, 0, 0);
}

std::string ImageFolderDataset::name() const {
  return who_ + " (" + dir_.string() + ")";
}

fs::path ImageFolderDataset::file(int64_t index) const {
  check_index(index);
  uint64_t begin = index == 0 ? 0 : name_end_[index - 1];
  return dir_ / classes_[labels_[index]] / names_.substr(begin, name_end_[index] - begin);
}

RawImage ImageFolderDataset::load(int64_t index) const {
  fs::path path = file(index);
  RawImage r = decode_rgb(read_file(path), path);
  r.label = labels_[index];
  return r;
}

int32_t ImageFolderDataset::get_into(int64_t index, SampleRng& rng, float* out) const {
  const Transform& t = transform();
  if (!t.resamples()) return ImageDataset::get_into(index, rng, out);
  const fs::path path = file(index);
  const std::vector<uint8_t> bytes = read_file(path);
  if (!is_jpeg(bytes)) {
    t.apply(decode_rgb(bytes, path).view, rng, out);
    return labels_[index];
  }
  const JpegSize size = jpeg_size(bytes, path);
  Transform::Resample r = t.draw_resample(size.width, size.height, rng);
  JpegPart part = decode_jpeg_part(bytes, path, r.box, r.size);
  r.box = part.box;
  t.apply_resample(part.image.view, r, rng, out);
  return labels_[index];
}

std::shared_ptr<ImageFolderDataset> open_imagenet(const fs::path& root, bool train,
                                                  Transform transform) {
  const char* split = train ? "train" : "val";
  const std::string hint =
      "expected train/<class>/*.JPEG and val/<class>/*.JPEG under " + root.string();
  ST_CHECK(fs::is_directory(root), "imagenet: data folder ", root.string(), " does not exist; ",
           hint);
  ST_CHECK(fs::is_directory(root / split), "imagenet: ", (root / split).string(),
           " does not exist; ", hint);
  auto ds = std::make_shared<ImageFolderDataset>(root / split, std::move(transform),
                                                 std::string("imagenet ") + split);
  const fs::path other = root / (train ? "val" : "train");
  if (fs::is_directory(other)) {
    std::vector<std::string> theirs =
        class_folders(other, std::string("imagenet ") + (train ? "val" : "train"));
    if (theirs != ds->classes()) {
      auto diff =
          std::mismatch(ds->classes().begin(), ds->classes().end(), theirs.begin(), theirs.end());
      std::string first = diff.first != ds->classes().end() ? *diff.first : *diff.second;
      ST_THROW("imagenet: ", split, " has ", ds->classes().size(), " classes but ", other.string(),
               " has ", theirs.size(), " (first difference: ", first, "); labels would not match");
    }
  }
  return ds;
}

}  // namespace st
