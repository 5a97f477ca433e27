// SharedSegments over an MPI-3 shared-memory window (MPI_Win_allocate_shared): one
// segment per rank of a communicator whose ranks all share one host's memory.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "comm/shared_segments.h"

namespace st {

class MpiSharedSegments : public SharedSegments {
 public:
  // Collective over `comm`: null (on every rank) unless all its ranks share memory.
  static std::unique_ptr<MpiSharedSegments> create(MPI_Comm comm);
  ~MpiSharedSegments() override;
  float* segment(int rank) override { return segments_[static_cast<size_t>(rank)]; }
  void reserve(int64_t floats) override;
  void fence() override;

 private:
  explicit MpiSharedSegments(MPI_Comm comm);
  void release();
  MPI_Comm comm_;  // not owned
  MPI_Win window_ = MPI_WIN_NULL;
  int64_t capacity_ = 0;  // floats per segment
  std::vector<float*> segments_;
};

}  // namespace st
