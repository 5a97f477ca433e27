#include "core/output_paths.h"

#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace st {

namespace fs = std::filesystem;

namespace {

// What stands at `path` in words, for a refusal ("" for a regular file or nothing).
std::string not_regular(const fs::path& path) {
  std::error_code ec;
  const fs::file_status s = fs::symlink_status(path, ec);
  if (ec || !fs::exists(s) || fs::is_regular_file(s)) return "";
  if (fs::is_symlink(s)) return "a symlink";
  if (fs::is_directory(s)) return "a folder";
  if (fs::is_block_file(s) || fs::is_character_file(s)) return "a device node";
  if (fs::is_fifo(s)) return "a FIFO";
  if (fs::is_socket(s)) return "a socket";
  return "not a regular file";
}

void check_regular(const std::string& flag, const std::string& given, const fs::path& path) {
  const std::string what = not_regular(path);
  ST_CHECK(what.empty(), flag, " ", given, ": ", path.string(), " is ", what,
           "; sparsetrain writes only regular files (remove it or choose another path)");
}

}  // namespace

void check_output_file(const std::string& flag, const std::string& path) {
  ST_CHECK(!path.empty(), flag, " is empty: give a file name");
  check_regular(flag, path, path);
  check_regular(flag, path, path + ".tmp");
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  ST_CHECK(fs::is_directory(parent, ec), flag, " ", path, ": the folder ", parent.string(),
           " does not exist");
}

void check_output_folder(const std::string& flag, const std::string& path,
                         const std::vector<std::string>& files) {
  ST_CHECK(!path.empty(), flag, " is empty: give a folder");
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::absolute(path), ec);
  ST_CHECK(!ec, flag, " ", path, ": ", ec.message());
  ST_CHECK(resolved != resolved.root_path(), flag, " ", path,
           " is the file-system root; give a folder of its own for the run");
  if (fs::exists(fs::symlink_status(path, ec))) {
    ST_CHECK(fs::is_directory(path, ec), flag, " ", path, " is ",
             not_regular(path).empty() ? "a file" : not_regular(path), ", not a folder");
  }
  for (const std::string& f : files) {
    check_regular(flag, path, fs::path(path) / f);
    check_regular(flag, path, fs::path(path) / (f + ".tmp"));
  }
}

}  // namespace st
