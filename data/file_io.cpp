#include "data/file_io.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace st {

std::vector<uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) ST_THROW(path.string(), ": cannot open (", std::strerror(errno), ")");
  std::streamsize n = in.tellg();
  ST_CHECK(n >= 0, path.string(), ": cannot determine its size");
  std::vector<uint8_t> bytes(static_cast<size_t>(n));
  in.seekg(0);
  if (n > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), n))
    ST_THROW(path.string(), ": read failed after ", in.gcount(), " of ", n, " bytes");
  return bytes;
}

GzipReader::GzipReader(const fs::path& path) : path_(path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) ST_THROW(path.string(), ": cannot open (", std::strerror(errno), ")");
  gzbuffer(f, 1 << 17);  // fewer syscalls than the 8 KB default
  gz_ = f;
}

GzipReader::~GzipReader() {
  if (gz_) gzclose(static_cast<gzFile>(gz_));
}

size_t GzipReader::read(void* dst, size_t n) {
  auto* f = static_cast<gzFile>(gz_);
  size_t done = 0;
  while (done < n) {
    // gzread takes an unsigned count; read in 1 GB pieces.
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, size_t{1} << 30));
    int got = gzread(f, static_cast<char*>(dst) + done, chunk);
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      ST_THROW(path_.string(), ": corrupt gzip data after ", done, " bytes (", msg, ")");
    }
    done += static_cast<size_t>(got);
    if (got == 0) break;
  }
  // A stream cut short ends with Z_BUF_ERROR ("unexpected end of file"): the caller
  // reports the short count, with note() as the reason.
  return done;
}

bool GzipReader::at_end() {
  char extra;
  return read(&extra, 1) == 0;
}

std::string GzipReader::note() const {
  int code = 0;
  const char* msg = gzerror(static_cast<gzFile>(gz_), &code);
  return code == Z_OK ? std::string() : std::string(msg);
}

fs::path find_one_of(const std::string& who, const fs::path& dir,
                     const std::vector<std::string>& candidates) {
  for (const std::string& c : candidates) {
    fs::path p = dir / c;
    if (fs::is_regular_file(p)) return p;
  }
  std::string list;
  for (const std::string& c : candidates) list += (list.empty() ? "" : " or ") + c;
  ST_THROW(who, ": ", list, " not found in ", dir.string());
}

void require_files(const std::string& who, const fs::path& dir,
                   const std::vector<std::string>& names, const std::string& hint) {
  std::string missing;
  for (const std::string& n : names)
    if (!fs::is_regular_file(dir / n)) missing += (missing.empty() ? "" : ", ") + n;
  if (missing.empty()) return;
  if (!fs::is_directory(dir))
    ST_THROW(who, ": data folder ", dir.string(), " does not exist; ", hint);
  ST_THROW(who, ": missing ", missing, " in ", dir.string(), "; ", hint);
}

}  // namespace st
