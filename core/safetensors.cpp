#include "core/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace st {

namespace {

const char* st_dtype(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
  }
  return "?";
}

DType parse_dtype(const std::string& s, const std::string& path, const std::string& name) {
  if (s == "F32") return DType::F32;
  if (s == "I32") return DType::I32;
  if (s == "I64") return DType::I64;
  ST_THROW(path, ": tensor '", name, "' has unsupported dtype ", s, " (F32, I32, I64 are)");
}

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    ST_CHECK(w > 0, path, ": write failed: ", std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

const Tensor* TensorFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

const Tensor& TensorFile::get(const std::string& name, const Shape& shape,
                              const std::string& path) const {
  const Tensor* t = find(name);
  ST_CHECK(t != nullptr, path, ": tensor '", name, "' is missing");
  ST_CHECK(t->shape() == shape, path, ": tensor '", name, "' has shape ", t->shape(), ", expected ",
           shape);
  return *t;
}

void save_safetensors(const std::string& path, const TensorFile& file) {
  nlohmann::ordered_json header;
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  size_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    ST_CHECK(name != "__metadata__", path, ": '__metadata__' is not a valid tensor name");
    header[name] = {{"dtype", st_dtype(t.dtype())},
                    {"shape", t.shape().dims()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // keep tensor data 8-byte aligned
  const uint64_t len = json.size();

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ST_CHECK(fd >= 0, tmp, ": cannot create: ", std::strerror(errno));
  try {
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(len >> (8 * i));
    write_all(fd, le, 8, tmp);
    write_all(fd, json.data(), json.size(), tmp);
    for (const auto& [name, t] : file.tensors) {
      Tensor host = t.to(Device::cpu());
      write_all(fd, host.raw(), host.nbytes(), tmp);
    }
    ST_CHECK(::fsync(fd) == 0, tmp, ": fsync failed: ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  // rename() is atomic: readers see the old file or the new one, never a torn one.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    ST_THROW(path, ": cannot replace with ", tmp, ": ", std::strerror(err));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// Reads every tensor the parsed header describes, in data order.
TensorFile parse_tensors(std::ifstream& in, const nlohmann::json& header, const std::string& path,
                         uint64_t data_start, uint64_t size);

TensorFile load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in.good(), path, ": cannot open checkpoint");
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  ST_CHECK(size >= 8, path, ": truncated (", size,
           " bytes; a safetensors file has an 8-byte header)");
  unsigned char le[8];
  in.read(reinterpret_cast<char*>(le), 8);
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(le[i]) << (8 * i);
  ST_CHECK(len <= size - 8, path, ": header length ", len, " exceeds the file size ", size);
  std::string json(len, '\0');
  in.read(json.data(), static_cast<std::streamsize>(len));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(json);
  } catch (const std::exception& e) {
    ST_THROW(path, ": corrupt header: ", e.what());
  }
  try {
    return parse_tensors(in, header, path, 8 + len, size);
  } catch (const nlohmann::json::exception& e) {
    ST_THROW(path, ": corrupt header: ", e.what());
  }
}

TensorFile parse_tensors(std::ifstream& in, const nlohmann::json& header, const std::string& path,
                         uint64_t data_start, uint64_t size) {
  const uint64_t data_size = size - data_start;
  TensorFile file;
  std::vector<std::pair<uint64_t, std::string>> order;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      for (auto m = it->begin(); m != it->end(); ++m)
        file.metadata[m.key()] = m->get<std::string>();
      continue;
    }
    order.emplace_back(it.value()["data_offsets"][0].get<uint64_t>(), it.key());
  }
  std::sort(order.begin(), order.end());
  for (const auto& [begin, name] : order) {
    const auto& h = header[name];
    std::vector<int64_t> dims = h["shape"].get<std::vector<int64_t>>();
    const DType dtype = parse_dtype(h["dtype"].get<std::string>(), path, name);
    const uint64_t end = h["data_offsets"][1].get<uint64_t>();
    Tensor t = Tensor::empty(Shape(dims), dtype);
    ST_CHECK(end >= begin && end - begin == t.nbytes(), path, ": tensor '", name, "' byte range [",
             begin, ", ", end, ") does not match its shape ", t.shape());
    ST_CHECK(end <= data_size, path, ": truncated: tensor '", name, "' ends at byte ", end,
             " but the data section holds ", data_size);
    in.seekg(static_cast<std::streamoff>(data_start + begin));
    in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
    ST_CHECK(in.good(), path, ": read failed for tensor '", name, "'");
    file.tensors.emplace_back(name, std::move(t));
  }
  return file;
}

}  // namespace st
