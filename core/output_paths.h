// Paths a command writes: sparsetrain writes and removes only regular files it names and
// folders it makes. A device node, a symlink or a folder where one of its files belongs is
// refused at start in one line naming the flag, before anything is written.
#pragma once

#include <string>
#include <vector>

namespace st {

// Throws one line naming `flag` unless `path` can be written as a regular file: not
// empty, nothing or a regular file there (not a folder, symlink, device node, FIFO or
// socket), the same for its temporary `<path>.tmp`, and an existing parent folder.
void check_output_file(const std::string& flag, const std::string& path);
// Throws one line naming `flag` unless `path` can hold a run's files: not empty, not the
// file-system root, a folder or nothing (then it is created), and each of `files` in it
// absent or a regular file.
void check_output_folder(const std::string& flag, const std::string& path,
                         const std::vector<std::string>& files);

}  // namespace st
