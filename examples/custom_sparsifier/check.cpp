// Runs the installed conformance checks on masked_topk (registered in masked_topk.cpp) on
// every rank mpirun starts, at two densities and two mask sizes; prints each report on
// rank 0 and exits 1 when any property failed on any rank.
#include <cstdio>
#include <memory>

#include <sparsetrain/comm/communicator.h>
#include <sparsetrain/comm/mpi_communicator.h>
#include <sparsetrain/comm/mpi_env.h>
#include <sparsetrain/sparsify/registry.h>
#include <sparsetrain/sparsify/testing/conformance.h>

int main() {
  st::set_mpi_env_defaults();
  std::unique_ptr<st::Communicator> comm;
  try {
    comm = st::make_communicator("auto");
    int failed = 0;
    for (double density : {0.01, 0.1}) {
      for (const char* keep : {"0.25", "1"}) {
        st::conformance::Case c;
        c.method = "masked_topk";
        c.density = density;
        c.params["keep"] = keep;
        const st::conformance::Report r = st::conformance::check_conformance(c, *comm);
        // Every rank's verdict counts: a failure on any rank fails the run.
        const double any_failed = comm->allreduce_scalar(r.passed() ? 0.0 : 1.0);
        if (comm->rank() == 0)
          std::printf("density %.2f keep %s on %d ranks: %s\n", density, keep, comm->size(),
                      r.summary().c_str());
        failed += any_failed > 0;
      }
    }
    return failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "check_masked_topk: %s\n", e.what());
    std::fflush(stderr);
    if (comm && comm->size() > 1) st::MpiCommunicator::abort_job(1);  // no rank waits forever
    return 1;
  }
}
