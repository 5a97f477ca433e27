#include "core/parallel.h"

#include <omp.h>

#include "core/error.h"

extern "C" void openblas_set_num_threads(int);

namespace st {

void set_num_threads(int n) {
  ST_CHECK(n >= 1, "--threads must be at least 1, got ", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
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
