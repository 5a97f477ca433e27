#include "comm/mpi_shared_segments.h"

#include "comm/mpi_check.h"
#include "comm/mpi_wait.h"
#include "core/error.h"

namespace st {

std::unique_ptr<MpiSharedSegments> MpiSharedSegments::create(MPI_Comm comm) {
  int size = 0;
  ST_MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_Comm host = MPI_COMM_NULL;
  ST_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  int host_size = 0;
  ST_MPI_CHECK(MPI_Comm_size(host, &host_size));
  ST_MPI_CHECK(MPI_Comm_free(&host));
  // Every rank must take the same answer: a rank alone on its host sees 1 of several.
  int all_share = host_size == size ? 1 : 0;
  ST_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all_share, 1, MPI_INT, MPI_MIN, comm));
  if (!all_share) return nullptr;
  return std::unique_ptr<MpiSharedSegments>(new MpiSharedSegments(comm));
}

MpiSharedSegments::MpiSharedSegments(MPI_Comm comm) : comm_(comm) {
  int size = 0;
  ST_MPI_CHECK(MPI_Comm_size(comm_, &size));
  segments_.assign(static_cast<size_t>(size), nullptr);
}

MpiSharedSegments::~MpiSharedSegments() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) release();
}

void MpiSharedSegments::release() {
  if (window_ == MPI_WIN_NULL) return;
  MPI_Win_unlock_all(window_);
  MPI_Win_free(&window_);  // collective: the ranks free their windows together
  capacity_ = 0;
}

void MpiSharedSegments::reserve(int64_t floats) {
  if (floats <= capacity_) return;
  // No rank may still read the old segments when they go.
  if (window_ != MPI_WIN_NULL) fence();
  release();
  MPI_Info info = MPI_INFO_NULL;
  ST_MPI_CHECK(MPI_Info_create(&info));
  // Each segment in its owner's memory (NUMA), not one block placed by rank 0.
  ST_MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
  float* mine = nullptr;
  const auto bytes = static_cast<MPI_Aint>(floats * static_cast<int64_t>(sizeof(float)));
  const int rc = MPI_Win_allocate_shared(bytes, sizeof(float), info, comm_, &mine, &window_);
  MPI_Info_free(&info);
  ST_MPI_CHECK(rc);
  for (size_t r = 0; r < segments_.size(); ++r) {
    MPI_Aint size = 0;
    int unit = 0;
    ST_MPI_CHECK(MPI_Win_shared_query(window_, static_cast<int>(r), &size, &unit, &segments_[r]));
  }
  // One passive epoch for the window's life: fence() orders the accesses.
  ST_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_));
  capacity_ = floats;
}

void MpiSharedSegments::fence() {
  ST_CHECK(window_ != MPI_WIN_NULL, "shared segments: fence before reserve");
  // The unified memory model's pattern: sync, barrier, sync.
  ST_MPI_CHECK(MPI_Win_sync(window_));
  MPI_Request req = MPI_REQUEST_NULL;
  ST_MPI_CHECK(MPI_Ibarrier(comm_, &req));
  wait_with_backoff(req, "MPI_Ibarrier");
  ST_MPI_CHECK(MPI_Win_sync(window_));
}

}  // namespace st
