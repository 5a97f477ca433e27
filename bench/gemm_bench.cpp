// OpenBLAS against oneDNN's sgemm on the GEMMs of one LSTM language-model step (the
// shapes follow from the flags as in bench/lstm_step_bench): the input projection and
// recurrent GEMMs of a layer, forward and backward, and the decoder's three. One JSON line
// a shape with both medians and their ratio; core/kernels/blas.cpp picks its library per
// GEMM size from these figures.
//
//   gemm_bench [--vocab 10000] [--hidden 200] [--bptt 35] [--batch 20] [--reps 20]
//              [--threads 2]
#include <cblas.h>
#include <dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/parallel.h"

namespace {

struct Shape {
  const char* what;
  bool ta, tb;
  int64_t m, n, k;
};

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Median over `reps` calls of one library on one shape (C accumulates: beta = 1).
template <class Call>
double median_ms(int reps, Call call) {
  std::vector<double> t;
  call();  // warm-up: packing buffers, JIT kernels
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_ms();
    call();
    t.push_back(now_ms() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t vocab = 10000, hidden = 200, bptt = 35, batch = 20;
  int reps = 20, threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (a == "--vocab")
      vocab = v;
    else if (a == "--hidden")
      hidden = v;
    else if (a == "--bptt")
      bptt = v;
    else if (a == "--batch")
      batch = v;
    else if (a == "--reps")
      reps = static_cast<int>(v);
    else if (a == "--threads")
      threads = static_cast<int>(v);
    else {
      std::fprintf(stderr, "gemm_bench: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  st::set_num_threads(threads);
  const int64_t tb = bptt * batch, g = 4 * hidden;
  const std::vector<Shape> shapes = {{"gates_input_fwd", false, true, tb, g, hidden},
                                     {"gates_recurrent_fwd", false, true, batch, g, hidden},
                                     {"gates_recurrent_bwd_dh", false, false, batch, hidden, g},
                                     {"gates_weight_grad", true, false, g, hidden, tb},
                                     {"gates_input_bwd_dx", false, false, tb, hidden, g},
                                     {"decoder_fwd", false, true, tb, vocab, hidden},
                                     {"decoder_bwd_dx", false, false, tb, hidden, vocab},
                                     {"decoder_weight_grad", true, false, vocab, hidden, tb}};
  std::vector<float> a(static_cast<size_t>(std::max(tb, g) * std::max(vocab, g)), 0.01f);
  std::vector<float> b(a.size(), 0.02f), c(a.size(), 0.0f);
  for (const Shape& s : shapes) {
    const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    const double blas = median_ms(reps, [&] {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                  static_cast<blasint>(s.m), static_cast<blasint>(s.n), static_cast<blasint>(s.k),
                  1.0f, a.data(), static_cast<blasint>(lda), b.data(), static_cast<blasint>(ldb),
                  1.0f, c.data(), static_cast<blasint>(s.n));
    });
    const double onednn = median_ms(reps, [&] {
      dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(),
                 ldb, 1.0f, c.data(), s.n);
    });
    std::printf(
        "{\"bench\":\"gemm\",\"shape\":\"%s\",\"form\":\"%c%c\",\"m\":%lld,\"n\":%lld,\"k\":%lld,"
        "\"mnk\":%lld,\"threads\":%d,\"openblas_ms\":%.4f,\"onednn_ms\":%.4f,"
        "\"onednn_over_openblas\":%.3f}\n",
        s.what, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', static_cast<long long>(s.m),
        static_cast<long long>(s.n), static_cast<long long>(s.k),
        static_cast<long long>(s.m * s.n * s.k), threads, blas, onednn, onednn / blas);
  }
  return 0;
}
