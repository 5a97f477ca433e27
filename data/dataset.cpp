#include "data/dataset.h"

namespace st {

void Dataset::check_index(int64_t index) const {
  ST_CHECK(index >= 0 && index < size(), name(), ": index ", index, " out of range [0, ", size(),
           ")");
}

Example Dataset::get(int64_t index, SampleRng& rng) const {
  Example e;
  e.image = Tensor::empty(example_shape());
  e.label = get_into(index, rng, e.image.f32());
  return e;
}

void ImageDataset::set_source_shape(int channels, int height, int width) {
  shape_ = transform_.output_shape(channels, height, width, name());
}

int32_t ImageDataset::get_into(int64_t index, SampleRng& rng, float* out) const {
  check_index(index);
  RawImage img = load(index);
  const ImageView& v = img.view;
  ST_CHECK(v.channels == shape_[0], name(), ": example ", index, " has ", v.channels,
           " channels, expected ", shape_[0]);
  transform_.apply(v, rng, out);
  return img.label;
}

}  // namespace st
