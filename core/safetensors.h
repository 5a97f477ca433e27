// safetensors files (the Hugging Face format PyTorch users load with
// safetensors.torch.load_file): an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}, "__metadata__": {string: string}}, then raw
// little-endian tensor bytes. Writes are atomic: temporary file, fsync, rename.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace st {

struct TensorFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order; CPU tensors
  std::map<std::string, std::string> metadata;

  const Tensor* find(const std::string& name) const;
  // Throws naming the file and the tensor when absent or of the wrong shape.
  const Tensor& get(const std::string& name, const Shape& shape, const std::string& path) const;
};

// Writes `file` to `path` atomically: a crash or kill during the write leaves any
// previous file at `path` intact.
void save_safetensors(const std::string& path, const TensorFile& file);
// Reads and validates a file; errors name the path and what is wrong.
TensorFile load_safetensors(const std::string& path);

}  // namespace st
