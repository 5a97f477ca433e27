#include "train/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"
#include "core/output_paths.h"
#include "train/config_check.h"

namespace st {

namespace fs = std::filesystem;

OutDirClaim::OutDirClaim(const std::string& out) {
  fd_ = ::open(out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ST_CHECK(fd_ >= 0, "--out ", out, ": cannot open the folder: ", std::strerror(errno));
  const std::string note = (fs::path(out) / ".sparsetrain.lock").string();
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
    // The pid is for a second run's message; the folder's lock is what counts.
    const int f = ::open(note.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f >= 0) {
      const std::string pid = std::to_string(::getpid()) + "\n";
      [[maybe_unused]] const ssize_t n = ::write(f, pid.data(), pid.size());
      ::close(f);
    }
    return;
  }
  const int err = errno;
  ::close(fd_);
  fd_ = -1;
  // A file system without locks (some network mounts) leaves the folder unclaimed.
  if (err != EWOULDBLOCK) return;
  std::string pid;
  if (const int f = ::open(note.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC); f >= 0) {
    char holder[32] = {};
    const ssize_t n = ::read(f, holder, sizeof holder - 1);
    ::close(f);
    pid.assign(holder, n > 0 ? static_cast<size_t>(n) : 0);
  }
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  ST_THROW("--out ", out, " is in use by another run (process ", pid.empty() ? "?" : pid,
           " holds the folder's lock); wait for it to end or choose another --out");
}

OutDirClaim::~OutDirClaim() {
  if (fd_ >= 0) ::close(fd_);
}

OutDirClaim& OutDirClaim::operator=(OutDirClaim&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

bool resumes_in_place(const TrainConfig& c) {
  if (c.resume.empty()) return false;
  std::error_code ec;
  const fs::path resume = fs::canonical(c.resume, ec);
  if (ec) return false;
  return fs::equivalent(resume.parent_path(), c.out, ec);
}

void check_run_paths(const TrainConfig& c) {
  check_output_folder("--out", c.out,
                      std::vector<std::string>(std::begin(kRunFiles), std::end(kRunFiles)));
}

void prepare_out_dir(const TrainConfig& c) {
  if (!c.trace.empty()) check_output_file("--trace", c.trace);
  std::vector<fs::path> existing;
  for (const char* name : kRunFiles)
    if (std::string(name) != ".sparsetrain.lock" && fs::exists(fs::path(c.out) / name))
      existing.push_back(fs::path(c.out) / name);
  if (existing.empty() || resumes_in_place(c)) return;
  // Suggest --resume only where there is a checkpoint to resume (a run killed in its
  // first step leaves metrics and no checkpoint).
  const fs::path here = fs::path(c.out) / "checkpoint.safetensors";
  ST_CHECK(c.overwrite || !c.resume.empty(), "--out ", c.out, " already holds a run (",
           existing[0].string(), ")",
           fs::exists(here) ? "; continue it with --resume " + here.string() + ", or"
                            : " that wrote no checkpoint;",
           " pass --overwrite to replace it");
  ST_CHECK(c.overwrite, "--out ", c.out, " already holds another run (", existing[0].string(),
           "); --resume ", c.resume, " would merge the two: continue that run in its own folder, ",
           "choose an empty --out, or pass --overwrite to replace ", c.out, "'s run");
  std::error_code ec;
  for (const fs::path& p : existing)
    ST_CHECK(c.resume.empty() || !fs::equivalent(p, c.resume, ec), "--overwrite would delete ",
             p.string(), ", the checkpoint --resume ", c.resume,
             " reads; copy it elsewhere first, or resume without --overwrite");
  for (const fs::path& p : existing) fs::remove(p);
}

OutDirClaim prepare_run(const TrainConfig& c, Communicator& comm) {
  check_config(c);
  check_same_config_on_all_ranks(c, comm);
  if (comm.rank() != 0) return {};
  check_run_paths(c);  // before anything is made
  fs::create_directories(c.out);
  OutDirClaim claim(c.out);
  prepare_out_dir(c);
  return claim;
}

}  // namespace st
