// What this build of sparsetrain is: its version, the commit it was built from and the
// backends compiled in. `sparsetrain --version` prints build_info_text().
#pragma once

#include <string>

#include "core/version.h"

namespace st {

struct BuildInfo {
  std::string version;     // the CMake project version, "0.1.0"
  std::string git_commit;  // the commit configured from, or "unknown" outside a git checkout
  bool onednn = false;     // CPU convolution through oneDNN
  bool cuda = false;       // the CUDA backend (kernels, cuDNN, cuBLAS)
  bool nccl = false;       // the NCCL communicator
};

const BuildInfo& build_info();
// Three lines: "sparsetrain 0.1.0", "commit <hash>", "backends: cpu, onednn, cuda, nccl".
std::string build_info_text();

}  // namespace st
