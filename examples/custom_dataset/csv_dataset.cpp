// A dataset reader added from outside the sparsetrain tree in one file: images as CSV
// text, registered as --dataset csv. The folder (--data-dir) holds train.csv and
// test.csv; the first line is "channels,height,width,classes", every other line one
// example: its label, then channels x height x width pixel values 0..255 in CHW order.
// Pixels reach the model as value / 255 (no augmentation).
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <sparsetrain/core/error.h>
#include <sparsetrain/data/dataset.h>
#include <sparsetrain/data/registry.h>

namespace {

class CsvDataset : public st::Dataset {
 public:
  CsvDataset(const std::filesystem::path& dir, bool train)
      : path_(dir / (train ? "train.csv" : "test.csv")) {
    std::ifstream in(path_);
    ST_CHECK(in.good(), "csv dataset: cannot open ", path_.string());
    std::string line;
    std::vector<int64_t> head = numbers(line_or_empty(in, line), 1);
    ST_CHECK(head.size() == 4 && head[0] > 0 && head[1] > 0 && head[2] > 0 && head[3] > 1,
             path_.string(), ":1: expected channels,height,width,classes");
    shape_ = st::Shape{head[0], head[1], head[2]};
    classes_ = static_cast<int>(head[3]);
    const int64_t pixels = head[0] * head[1] * head[2];
    for (int64_t row = 2; std::getline(in, line); ++row) {
      if (line.empty()) continue;
      const std::vector<int64_t> v = numbers(line, row);
      ST_CHECK(static_cast<int64_t>(v.size()) == pixels + 1, path_.string(), ":", row,
               ": expected a label and ", pixels, " pixels, got ", v.size(), " values");
      ST_CHECK(v[0] >= 0 && v[0] < classes_, path_.string(), ":", row, ": label ", v[0],
               " outside [0, ", classes_, ")");
      labels_.push_back(static_cast<int32_t>(v[0]));
      for (int64_t i = 1; i <= pixels; ++i) {
        ST_CHECK(v[i] >= 0 && v[i] <= 255, path_.string(), ":", row, ": pixel ", v[i],
                 " outside 0..255");
        pixels_.push_back(static_cast<float>(v[i]) / 255.0f);
      }
    }
    ST_CHECK(!labels_.empty(), path_.string(), ": no examples");
  }

  std::string name() const override { return "csv (" + path_.string() + ")"; }
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  int num_classes() const override { return classes_; }
  st::Shape example_shape() const override { return shape_; }
  int32_t get_into(int64_t index, st::SampleRng& /*rng*/, float* out) const override {
    check_index(index);
    const int64_t n = shape_.numel();
    std::copy_n(pixels_.begin() + index * n, n, out);
    return labels_[static_cast<size_t>(index)];
  }

 private:
  const std::string& line_or_empty(std::ifstream& in, std::string& line) {
    if (!std::getline(in, line)) line.clear();
    return line;
  }
  std::vector<int64_t> numbers(const std::string& line, int64_t row) const {
    std::vector<int64_t> v;
    std::stringstream s(line);
    std::string cell;
    while (std::getline(s, cell, ',')) {
      size_t used = 0;
      try {
        v.push_back(std::stoll(cell, &used));
      } catch (const std::exception&) {
        used = 0;
      }
      ST_CHECK(used > 0 && used == cell.size(), path_.string(), ":", row, ": '", cell,
               "' is not an integer");
    }
    return v;
  }

  std::filesystem::path path_;
  st::Shape shape_;
  int classes_ = 0;
  std::vector<int32_t> labels_;
  std::vector<float> pixels_;
};

// The whole registration: --dataset csv --data-dir DIR now reads this format.
const st::DatasetRegistrar kCsv({"csv", "images as CSV rows (label, pixels)",
                                 [](const st::DatasetSpec& spec) -> std::shared_ptr<st::Dataset> {
                                   return std::make_shared<CsvDataset>(spec.dir, spec.train);
                                 }});

}  // namespace
