#include "core/safetensors.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

namespace st {

namespace {

using json = nlohmann::json;

// The reference reader's limit: a longer header is refused before it is read.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

const char* st_dtype(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
    case DType::BF16:
      return "BF16";
  }
  return "?";
}

// A name from the file as a JSON string literal: quoted, control characters escaped, so
// an error about it stays on one line.
std::string quoted(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string tensor_ref(const std::string& path, const std::string& name) {
  return path + ": tensor " + quoted(name);
}

// One tensor as the header describes it, checked against the data section.
struct Entry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
  uint64_t begin = 0, end = 0;
};

struct FileLayout {
  std::vector<Entry> entries;  // sorted by data offset
  std::map<std::string, std::string> metadata;
};

bool is_non_negative_int(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

DType parse_dtype(const json& v, const std::string& where) {
  ST_CHECK(v.is_string(), where, ": dtype must be a string, got ", v.type_name());
  const std::string s = v.get<std::string>();
  if (s == "F32") return DType::F32;
  if (s == "I32") return DType::I32;
  if (s == "I64") return DType::I64;
  ST_THROW(where, ": unsupported dtype ", quoted(s), " (F32, I32, I64 are)");
}

// The dimensions, and their product times the element size in *bytes; throws on a
// negative or non-integer entry and on overflow.
std::vector<int64_t> parse_shape(const json& v, size_t elem, const std::string& where,
                                 uint64_t* bytes) {
  ST_CHECK(v.is_array(), where, ": shape must be an array, got ", v.type_name());
  std::vector<int64_t> dims;
  uint64_t n = elem;
  for (const json& d : v) {
    ST_CHECK(is_non_negative_int(d), where, ": shape entries must be non-negative integers, got ",
             d.dump(-1, ' ', false, json::error_handler_t::replace));
    const uint64_t u = d.get<uint64_t>();
    ST_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
                 !__builtin_mul_overflow(n, u, &n),
             where, ": shape ", v.dump(), " overflows");
    dims.push_back(static_cast<int64_t>(u));
  }
  ST_CHECK(n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), where, ": shape ",
           v.dump(), " overflows");
  *bytes = n;
  return dims;
}

Entry parse_entry(const std::string& name, const json& v, uint64_t data_size,
                  const std::string& path) {
  const std::string where = tensor_ref(path, name);
  ST_CHECK(v.is_object(), where, ": entry must be an object, got ", v.type_name());
  for (const char* key : {"dtype", "shape", "data_offsets"})
    ST_CHECK(v.contains(key), where, ": '", key, "' is missing");
  Entry e;
  e.name = name;
  e.dtype = parse_dtype(v["dtype"], where);
  uint64_t bytes = 0;
  e.dims = parse_shape(v["shape"], dtype_size(e.dtype), where, &bytes);
  const json& off = v["data_offsets"];
  ST_CHECK(off.is_array() && off.size() == 2 && is_non_negative_int(off[0]) &&
               is_non_negative_int(off[1]),
           where, ": data_offsets must be [begin, end], two non-negative integers, got ",
           off.dump(-1, ' ', false, json::error_handler_t::replace));
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  ST_CHECK(e.begin <= e.end, where, ": data_offsets [", e.begin, ", ", e.end,
           "] end before they begin");
  ST_CHECK(e.end <= data_size, where, ": data_offsets [", e.begin, ", ", e.end,
           "] reach past the data section of ", data_size, " bytes (truncated file?)");
  ST_CHECK(e.end - e.begin == bytes, where, ": data_offsets [", e.begin, ", ", e.end, "] hold ",
           e.end - e.begin, " bytes, but shape ", v["shape"].dump(), " of ", st_dtype(e.dtype),
           " needs ", bytes);
  return e;
}

std::map<std::string, std::string> parse_metadata(const json& v, const std::string& path) {
  ST_CHECK(v.is_object(), path, ": __metadata__ must be an object, got ", v.type_name());
  std::map<std::string, std::string> out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    ST_CHECK(it->is_string(), path, ": __metadata__ key ", quoted(it.key()),
             " must be a string, got ", it->type_name());
    out[it.key()] = it->get<std::string>();
  }
  return out;
}

// The tensors must tile the data section exactly, as the format requires: in offset
// order each starts where the previous ended, and the last ends at the section's end.
void check_tiling(std::vector<Entry>& entries, uint64_t data_size, const std::string& path) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    ST_CHECK(e.begin >= at, tensor_ref(path, e.name), ": bytes [", e.begin, ", ", e.end,
             ") overlap tensor ", quoted(prev ? prev->name : ""), " at [", prev ? prev->begin : 0,
             ", ", at, ")");
    ST_CHECK(e.begin == at, tensor_ref(path, e.name), ": starts at byte ", e.begin,
             ", leaving a gap after byte ", at, " of the data section");
    at = e.end;
    prev = &e;
  }
  ST_CHECK(at == data_size, path, ": the tensors cover ", at, " bytes but the data section holds ",
           data_size);
}

// nlohmann's parser keeps the last of two equal keys of an object; the format (and the
// reference reader) refuses such a header, so the parse records the first repeated key.
json parse_json_unique(std::string_view text, const std::string& path) {
  std::vector<std::set<std::string>> open;  // the keys of each object being parsed
  std::string repeated;
  auto cb = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open.emplace_back();
    } else if (event == json::parse_event_t::object_end && !open.empty()) {
      open.pop_back();
    } else if (event == json::parse_event_t::key && !open.empty() && repeated.empty() &&
               !open.back().insert(parsed.get<std::string>()).second) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception& e) {
    ST_THROW(path, ": corrupt header: ", e.what());
  }
  ST_CHECK(repeated.empty(), path, ": the header names ", quoted(repeated),
           " twice (duplicate tensor or metadata names)");
  return header;
}

FileLayout parse_header(std::string_view text, uint64_t data_size, const std::string& path) {
  const json header = parse_json_unique(text, path);
  ST_CHECK(header.is_object(), path, ": header must be a JSON object, got ", header.type_name());
  FileLayout layout;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__")
      layout.metadata = parse_metadata(it.value(), path);
    else
      layout.entries.push_back(parse_entry(it.key(), it.value(), data_size, path));
  }
  check_tiling(layout.entries, data_size, path);
  return layout;
}

// The header length from the first 8 bytes, checked against the file size.
uint64_t header_length(const unsigned char* le, uint64_t size, const std::string& path) {
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(le[i]) << (8 * i);
  ST_CHECK(len <= size - 8, path, ": header length ", len, " exceeds the file size ", size,
           " (truncated or not a safetensors file)");
  ST_CHECK(len <= kMaxHeaderBytes, path, ": header length ", len, " exceeds the limit of ",
           kMaxHeaderBytes, " bytes");
  return len;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

struct HashState {
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> s{XXH3_createState(),
                                                                    XXH3_freeState};
  HashState() {
    ST_CHECK(s != nullptr, "out of memory for the checksum state");
    XXH3_64bits_reset(s.get());
  }
  void add(const void* p, size_t n) {
    if (n > 0) XXH3_64bits_update(s.get(), p, n);
  }
  std::string hex() const { return hex64(XXH3_64bits_digest(s.get())); }
};

// Reads bytes [offset, offset + n) of the data section into dst, or throws.
using ReadFn = std::function<void(uint64_t offset, void* dst, size_t n)>;

// Reads every tensor of `layout` in data order, then checks the checksum if stored.
TensorFile read_tensors(FileLayout layout, const ReadFn& read, const std::string& path) {
  TensorFile file;
  HashState hash;
  for (const Entry& e : layout.entries) {
    Tensor t = Tensor::empty(Shape(e.dims), e.dtype);
    read(e.begin, t.raw(), t.nbytes());
    hash.add(t.raw(), t.nbytes());
    file.tensors.emplace_back(e.name, std::move(t));
  }
  auto sum = layout.metadata.find(kChecksumKey);
  if (sum != layout.metadata.end()) {
    ST_CHECK(sum->second == hash.hex(), path, ": tensor data checksum mismatch (file damaged)");
    layout.metadata.erase(sum);
  }
  file.metadata = std::move(layout.metadata);
  return file;
}

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    ST_CHECK(w > 0, path, ": write failed: ", std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// The 8-byte length and the JSON header, padded so tensor data stays 8-byte aligned.
std::string encode_header(const TensorFile& file, const std::vector<Tensor>& host,
                          const std::string& checksum, const std::string& path) {
  nlohmann::ordered_json header;
  std::map<std::string, std::string> meta = file.metadata;
  meta[kChecksumKey] = checksum;
  header["__metadata__"] = meta;
  size_t offset = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    const std::string& name = file.tensors[i].first;
    ST_CHECK(name != "__metadata__", path, ": '__metadata__' is not a valid tensor name");
    ST_CHECK(!header.contains(name), tensor_ref(path, name), ": stored twice");
    header[name] = {{"dtype", st_dtype(host[i].dtype())},
                    {"shape", host[i].shape().dims()},
                    {"data_offsets", {offset, offset + host[i].nbytes()}}};
    offset += host[i].nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // a name or value that is not UTF-8
    ST_THROW(path, ": cannot encode the header: ", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(uint64_t{text.size()} >> (8 * i));
  return out + text;
}

// Writes head + tensors to `tmp` and fsyncs it; removes `tmp` on any failure.
void write_temp(const std::string& tmp, const std::string& head, const std::vector<Tensor>& host) {
  // O_TRUNC: a temporary left by a killed save is overwritten, never appended to.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ST_CHECK(fd >= 0, tmp, ": cannot create: ", std::strerror(errno));
  try {
    write_all(fd, head.data(), head.size(), tmp);
    for (const Tensor& t : host) write_all(fd, t.raw(), t.nbytes(), tmp);
    ST_CHECK(::fsync(fd) == 0, tmp, ": fsync failed: ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  const int rc = ::close(fd);
  const int err = errno;
  if (rc != 0) {
    ::unlink(tmp.c_str());
    ST_THROW(tmp, ": close failed: ", std::strerror(err));
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
  ST_CHECK(t != nullptr, tensor_ref(path, name), " is missing");
  ST_CHECK(t->shape() == shape, tensor_ref(path, name), " has shape ", t->shape(), ", expected ",
           shape);
  return *t;
}

void save_safetensors(const std::string& path, const TensorFile& file) {
  std::vector<Tensor> host;
  HashState hash;
  for (const auto& [name, t] : file.tensors) {
    host.push_back(t.to(Device::cpu()));
    hash.add(host.back().raw(), host.back().nbytes());
  }
  const std::string head = encode_header(file, host, hash.hex(), path);
  // One fixed temporary name, so a save killed half-way leaves at most one stale file,
  // which the next save of the same path overwrites and renames away.
  const std::string tmp = path + ".tmp";
  write_temp(tmp, head, host);
  // rename() is atomic: readers see the old file or the new one, never a torn one.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    ST_THROW(path, ": cannot replace with ", tmp, ": ", std::strerror(err));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

namespace {
// An open file whose header has been read and checked against the file's size.
struct OpenedFile {
  std::ifstream in;
  uint64_t data_start = 0;
  FileLayout layout;
};

OpenedFile open_checked(const std::string& path) {
  OpenedFile f;
  f.in.open(path, std::ios::binary);
  ST_CHECK(f.in.good(), path, ": cannot open checkpoint");
  f.in.seekg(0, std::ios::end);
  const auto end = f.in.tellg();
  ST_CHECK(end >= 0, path, ": cannot determine the file size");
  const uint64_t size = static_cast<uint64_t>(end);
  f.in.seekg(0);
  ST_CHECK(size >= 8, path, ": truncated (", size,
           " bytes; a safetensors file has an 8-byte header)");
  unsigned char le[8];
  f.in.read(reinterpret_cast<char*>(le), 8);
  const uint64_t len = header_length(le, size, path);
  std::string text(len, '\0');
  f.in.read(text.data(), static_cast<std::streamsize>(len));
  ST_CHECK(f.in.gcount() == static_cast<std::streamsize>(len), path, ": read failed in the header");
  f.data_start = 8 + len;
  f.layout = parse_header(text, size - f.data_start, path);
  return f;
}
}  // namespace

TensorFile load_safetensors(const std::string& path) {
  OpenedFile f = open_checked(path);
  auto read = [&](uint64_t offset, void* dst, size_t n) {
    f.in.seekg(static_cast<std::streamoff>(f.data_start + offset));
    f.in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    ST_CHECK(f.in.gcount() == static_cast<std::streamsize>(n), path, ": read failed at byte ",
             f.data_start + offset, " (file changed while reading?)");
  };
  return read_tensors(std::move(f.layout), read, path);
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  std::map<std::string, std::string> metadata = open_checked(path).layout.metadata;
  metadata.erase(kChecksumKey);
  return metadata;
}

std::string safetensors_identity(const std::string& path) {
  const std::map<std::string, std::string> metadata = open_checked(path).layout.metadata;
  const auto sum = metadata.find(kChecksumKey);
  const auto step = metadata.find("step");
  return "step " + (step == metadata.end() ? std::string("?") : step->second) + ", data checksum " +
         (sum == metadata.end() ? std::string("none") : sum->second);
}

TensorFile parse_safetensors(const uint8_t* data, size_t size, const std::string& path) {
  ST_CHECK(size >= 8, path, ": truncated (", size,
           " bytes; a safetensors file has an 8-byte header)");
  const uint64_t len = header_length(data, size, path);
  const uint64_t data_start = 8 + len;
  std::string_view text(reinterpret_cast<const char*>(data) + 8, len);
  FileLayout layout = parse_header(text, size - data_start, path);
  auto read = [&](uint64_t offset, void* dst, size_t n) {
    if (n > 0) std::memcpy(dst, data + data_start + offset, n);
  };
  return read_tensors(std::move(layout), read, path);
}

}  // namespace st
