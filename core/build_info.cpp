#include "core/build_info.h"

#ifndef ST_GIT_COMMIT
#define ST_GIT_COMMIT "unknown"
#endif

namespace st {

const BuildInfo& build_info() {
  static const BuildInfo info = [] {
    BuildInfo b;
    b.version = SPARSETRAIN_VERSION;
    b.git_commit = ST_GIT_COMMIT;
#ifdef ST_BUILT_WITH_ONEDNN
    b.onednn = true;
#endif
#ifdef SPARSETRAIN_WITH_CUDA
    b.cuda = true;
    b.nccl = true;  // the CUDA build always links NCCL (cmake/Cuda.cmake)
#endif
    return b;
  }();
  return info;
}

std::string build_info_text() {
  const BuildInfo& b = build_info();
  std::string backends = "cpu";
  if (b.onednn) backends += ", onednn";
  if (b.cuda) backends += ", cuda";
  if (b.nccl) backends += ", nccl";
  return "sparsetrain " + b.version + "\ncommit " + b.git_commit + "\nbackends: " + backends + "\n";
}

}  // namespace st
