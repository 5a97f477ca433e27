// File reading with errors that name the file and what went wrong, shared by the
// dataset readers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace st {

namespace fs = std::filesystem;

// Whole file into memory; throws "<path>: cannot open (<reason>)" and similar.
std::vector<uint8_t> read_file(const fs::path& path);

// A gzip stream through zlib; plain (uncompressed) files read through unchanged.
class GzipReader {
 public:
  explicit GzipReader(const fs::path& path);
  ~GzipReader();
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;

  // Reads up to n bytes; returns how many were read (fewer only at the end of the data).
  // A corrupt stream throws, naming the file and zlib's message.
  size_t read(void* dst, size_t n);
  // True when the stream has no more data; a bad trailing CRC or length throws here.
  bool at_end();
  // zlib's note on a stream that ended early ("unexpected end of file"), else "".
  std::string note() const;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  void* gz_ = nullptr;  // gzFile, kept out of the header
};

// Throws when none of `candidates` exists in dir: "<who>: no <name> in <dir>; expected
// <list>". Returns the first that exists.
fs::path find_one_of(const std::string& who, const fs::path& dir,
                     const std::vector<std::string>& candidates);
// Throws naming every missing file of `names` in dir, with `hint` on what dir should hold.
void require_files(const std::string& who, const fs::path& dir,
                   const std::vector<std::string>& names, const std::string& hint);

}  // namespace st
