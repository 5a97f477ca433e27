// safetensors files (the Hugging Face format PyTorch users load with
// safetensors.torch.load_file): an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}, "__metadata__": {string: string}}, then raw
// little-endian tensor bytes. Writes are atomic: temporary file, fsync, rename.
//
// Reading treats the file as hostile: every header field is checked before use (JSON
// types, known dtype, non-negative shape without overflow, data_offsets [begin, end]
// inside the data section and matching the shape, tensors tiling the data section with
// neither gaps nor overlaps, a header no longer than the file) and each error is one line
// naming the file and the tensor or key. Files written here also carry an XXH3-64
// checksum of the data section in the metadata, verified on load when present; files
// from other writers (PyTorch) have none and load as before.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace st {

// Metadata key of the data checksum: 16 lowercase hex digits of XXH3-64 over the bytes
// after the header. load_safetensors() checks and removes it, so callers never see it.
inline constexpr const char* kChecksumKey = "sparsetrain.xxh3_64";

struct TensorFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order; CPU tensors
  std::map<std::string, std::string> metadata;

  const Tensor* find(const std::string& name) const;
  // Throws naming the file and the tensor when absent or of the wrong shape.
  const Tensor& get(const std::string& name, const Shape& shape, const std::string& path) const;
};

// Writes `file` to `path` atomically through `<path>.tmp`: a crash or kill during the
// write leaves any previous file at `path` intact, and the next save overwrites the
// stale temporary. A failed save removes its temporary.
void save_safetensors(const std::string& path, const TensorFile& file);
// Reads and validates a file; errors name the path and what is wrong.
TensorFile load_safetensors(const std::string& path);
// The metadata of a file, reading and checking its header only (the tensors and their
// checksum are not read): what a caller needs before it loads the whole file.
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);
// Which file this is, from its header: its "step" metadata and the checksum of its data
// (sparsetrain's files carry one), e.g. "step 40, data checksum 0123456789abcdef". Two
// ranks' copies of a checkpoint with the same identity hold the same bytes.
std::string safetensors_identity(const std::string& path);
// The same checks on a whole file held in memory; `path` names it in errors.
TensorFile parse_safetensors(const uint8_t* data, size_t size, const std::string& path);

}  // namespace st
