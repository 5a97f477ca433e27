// Dataset: a fixed-size collection of labelled images. get() returns example `index`
// as float32 CHW after the dataset's transform, so the loader can write samples
// straight into a batch without knowing the file format.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "data/image.h"
#include "data/sample_rng.h"
#include "data/transform.h"

namespace st {

struct Example {
  Tensor image;  // float32 [C, H, W]
  int32_t label = 0;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  // "cifar10 train (/data/cifar-10-batches-bin)": used in errors and logs.
  virtual std::string name() const = 0;
  virtual int64_t size() const = 0;
  virtual int num_classes() const = 0;
  // [C, H, W] of every example get() returns.
  virtual Shape example_shape() const = 0;
  // Writes example `index` (example_shape().numel() floats) to out and returns its label.
  // Augmentation randomness comes only from rng. Safe to call from many threads.
  virtual int32_t get_into(int64_t index, SampleRng& rng, float* out) const = 0;

  Example get(int64_t index, SampleRng& rng) const;

 protected:
  void check_index(int64_t index) const;
};

// The common shape of every image dataset here: load() yields the decoded 8-bit image
// (one virtual call per sample), the transform turns it into floats.
class ImageDataset : public Dataset {
 public:
  Shape example_shape() const override { return shape_; }
  int32_t get_into(int64_t index, SampleRng& rng, float* out) const override;
  const Transform& transform() const { return transform_; }
  // The undecorated image and label (no transform), e.g. for tests and inspection.
  virtual RawImage load(int64_t index) const = 0;

 protected:
  explicit ImageDataset(Transform t) : transform_(std::move(t)) {}
  // Derived constructors call this once the source image size is known (0 = varies).
  void set_source_shape(int channels, int height, int width);

 private:
  Transform transform_;
  Shape shape_;
};

}  // namespace st
