#include "core/parallel.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>

#include <atomic>

#include "core/error.h"

extern "C" void openblas_set_num_threads(int);

namespace st {

namespace {
// The process's setting (0: never set). OpenMP's thread count is per thread, so a thread
// that runs kernels for others (an emulated device's stream executor) adopts it.
std::atomic<int> g_threads{0};
std::atomic<bool> g_cores_shared{false};
}  // namespace

void set_num_threads(int n) {
  ST_CHECK(n >= 1, "--threads must be at least 1, got ", n);
  g_threads.store(n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

void set_openmp_env_defaults(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;  // the user's choice
  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  ::setenv("GOMP_SPINCOUNT", kOmpSpinCount, 0);  // overrides passive's zero spin
  ::execv("/proc/self/exe", argv);               // returns only on failure
}

void note_node_share(int local_ranks) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  set_cores_shared(static_cast<int64_t>(local_ranks) * num_threads() > cores);
}

void set_cores_shared(bool shared) {
  g_cores_shared.store(shared);
}

bool cores_shared() {
  return g_cores_shared.load();
}

void adopt_process_threads() {
  const int n = g_threads.load();
  if (n > 0 && omp_get_max_threads() != n) omp_set_num_threads(n);
}

int num_threads() {
  return omp_get_max_threads();
}
int64_t omp_threads_in_team() {
  return omp_get_num_threads();
}
int64_t omp_thread_id() {
  return omp_get_thread_num();
}

}  // namespace st
