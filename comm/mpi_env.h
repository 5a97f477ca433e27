// Open MPI settings this program wants unless the user chose otherwise. Open MPI reads
// its MCA parameters from OMPI_MCA_* environment variables in MPI_Init, so they must be
// in the environment before the first communicator is made (main() calls this first).
#pragma once

namespace st {

// mpi_yield_when_idle=1: wherever Open MPI still waits inside a call (MPI_Init, MPI_Finalize,
// each MPI_Test of the back-off that finds nothing to do), it yields the core to a thread
// that has work instead of spinning through its time slice. mpirun turns this on by itself
// only when it sees more processes than slots; a rank's own communication thread is
// oversubscription it cannot see.
// btl_tcp_links=2: two TCP connections to each peer instead of one. Two ranks that send
// each other a large message at once (allreduce and allgather on 2 ranks) need both
// directions of one connection; with a single one the exchange sometimes takes turns
// (the rendezvous reply can queue behind the replying rank's own data), with two it runs
// both ways at once: median 174 ms against 94 for 1 MB each way at 100 Mbit/s with a
// shallow token bucket and without the setting above, 101 against 95 with it
// (docs/RESULTS.md, "Two ranks on a full-duplex link").
// A variable the user has set is left alone.
void set_mpi_env_defaults();

}  // namespace st
