// What every rank must share before the first collective that depends on it: the
// subcommand and the flags that decide which collectives run (--check-flags, the kind of
// --device, --comm) and which checkpoint a run resumes. Under an MPI launcher these are
// compared right after MPI starts, before anything else: ranks that disagree would
// otherwise build different communicators (a crash), run different collectives (a hang)
// or resume different states (a hang or a silent mix).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "core/error.h"

namespace st {

struct LaunchFact {
  std::string flag;   // as the user wrote it: "--device", "the subcommand"
  std::string value;  // what this rank has
};

// An error every rank raises at the same point, since every rank saw the same facts: each
// prints its line and ends normally, and no rank has to take the others down.
class EveryRankError : public Error {
 public:
  EveryRankError(int rank, int size, const std::string& what)
      : Error(what), rank_(rank), size_(size) {}
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_, size_;
};

// Under an MPI launcher: starts MPI at the thread level --comm `backend` on `device` needs
// (needs_mpi_thread_multiple), compares `facts` (the same number, in the same order, on
// every rank) and returns the bootstrap communicator for make_communicator; throws
// EveryRankError naming the first fact two ranks disagree on and both values. Without a
// launcher: null.
std::unique_ptr<MpiCommunicator> agree_on_launch(const std::string& backend,
                                                 const std::string& device,
                                                 const std::vector<LaunchFact>& facts);

// The facts a command compares (apps/sparsetrain.cpp): `checkpoint` is the file it
// resumes or evaluates ("" for none); an unreadable file's error is its value, so ranks
// that cannot all read it disagree in one line instead of failing one by one.
std::vector<LaunchFact> launch_facts(const std::string& subcommand, bool check_flags,
                                     const std::string& device, const std::string& comm,
                                     const std::string& checkpoint_flag,
                                     const std::string& checkpoint);

}  // namespace st
