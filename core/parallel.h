// CPU parallelism: OpenMP for loops, OpenBLAS's own threads for GEMM. One knob
// (set_num_threads) sets both so `--threads N` means N cores everywhere.
#pragma once

#include <cstdint>

namespace st {

void set_num_threads(int n);
int num_threads();
// Whether this process's threads share the node's cores with other processes' threads:
// note_node_share(local ranks) sets it when local ranks x threads exceed the cores this
// process may run on. Kernels whose threads wait for each other in spin loops take
// another route then (bf16 convolution weight gradients, core/kernels/
// conv_onednn_sliced_wgrad.h).
void note_node_share(int local_ranks);
void set_cores_shared(bool shared);
bool cores_shared();
// How idle OpenMP threads wait, unless the user set OMP_WAIT_POLICY: passive (sleep, so
// data-loading and communication threads get the cores) after a short spin of
// kOmpSpinCount iterations (GOMP_SPINCOUNT, about 30 us), which keeps a team awake across
// the back-to-back parallel regions of a step (an LSTM step's 140 small recurrent GEMMs
// and cell loops: 0.93x the time of no spin; small_cnn at 2 and 4 ranks x 2 threads: level,
// docs/RESULTS.md). libgomp reads both when it loads, before main, so when this sets one it
// re-executes the program once (argv as given); it returns if nothing needed setting or
// the re-execution failed. Programs (the CLI, the step benchmarks) call it first in main.
inline constexpr const char* kOmpSpinCount = "3000";
void set_openmp_env_defaults(char** argv);
// Makes the calling thread's OpenMP teams as large as set_num_threads said (OpenMP keeps
// the count per thread): a thread that runs kernels for another, as an emulated device's
// stream executor does, must split them as the caller's thread would, or its reductions
// add in another order than the CPU run's.
void adopt_process_threads();
// Thin wrappers so headers need not include omp.h.
int64_t omp_threads_in_team();
int64_t omp_thread_id();

// Runs fn(begin, end) over [0, n) split into contiguous chunks across threads.
// Falls back to one call when n is below `grain`.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (n < grain) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    int64_t nt = omp_threads_in_team();
    int64_t t = omp_thread_id();
    int64_t chunk = (n + nt - 1) / nt;
    int64_t b = t * chunk, e = b + chunk < n ? b + chunk : n;
    if (b < e) fn(b, e);
  }
}

}  // namespace st
