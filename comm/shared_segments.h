// Memory that every rank of a communicator reads and writes directly: one segment per
// rank, for ranks on one host. The two-level exchange moves a bucket inside a node with
// it (comm/hierarchical_hook.cpp): a rank copies its bucket into its own segment and
// reads the others' parts from theirs, at memory speed, where MPI's shared-memory
// collectives copy through intermediate buffers in rounds that each need both processes
// scheduled (on an oversubscribed machine, a time slice per round).
#pragma once

#include <cstdint>

namespace st {

class SharedSegments {
 public:
  virtual ~SharedSegments() = default;
  // Rank r's segment: at least the floats the last reserve() asked for, readable and
  // writable by every rank of the communicator.
  virtual float* segment(int rank) = 0;
  // Collective, with the same `floats` on every rank: segments of at least that many
  // floats (a larger request reallocates them; their contents are not kept).
  virtual void reserve(int64_t floats) = 0;
  // Collective: every rank's writes before it are visible to every rank's reads after
  // it, and no rank passes it before every rank has reached it.
  virtual void fence() = 0;
};

}  // namespace st
