// One NCF training step (forward + backward + Adam) on random (user, item) pairs at
// MovieLens-20M's sizes (models/ncf.h, 31,832,577 parameters): median step time and peak
// resident memory, as `sparsetrain train --arch ncf` takes a step (binary cross-entropy
// on the logits, Adam lr 0.001, dense embedding gradients). The PyTorch peer and the
// comparison in one run: bench/compare_ncf_step.py.
//   ncf_step_bench [--batch 256] [--reps 20] [--threads 2]
#include <sys/resource.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/phase_timing.h"
#include "core/parallel.h"
#include "layers/bce_with_logits.h"
#include "layers/flat_params.h"
#include "models/ncf.h"
#include "optim/adam.h"

int main(int argc, char** argv) {
  st::set_openmp_env_defaults(argv);  // the CLI's OpenMP wait policy, so steps time alike
  int batch = 256, reps = 20, threads = 2, warmup = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--batch")
      batch = std::atoi(argv[i + 1]);
    else if (f == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (f == "--threads")
      threads = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "ncf_step_bench: unknown flag %s (--batch --reps --threads)\n", argv[i]);
      return 2;
    }
  }
  try {
    st::set_num_threads(threads);
    st::Rng rng(0);
    st::LayerPtr model = st::ncf(st::kMl20mUsers, st::kMl20mItems, rng);
    st::FlatParams flat(*model, st::Device::cpu());
    st::AdamOptions ao;
    ao.lr = 1e-3f;
    st::Adam adam(flat.params(), ao);
    // A batch as the trainer draws it: one positive and four negatives per observed pair.
    st::Rng data(1);
    std::vector<int32_t> ids(2 * static_cast<size_t>(batch));
    std::vector<float> labels(batch);
    for (int i = 0; i < batch; ++i) {
      ids[i] = static_cast<int32_t>(data.below(static_cast<uint32_t>(st::kMl20mUsers)));
      ids[batch + i] = static_cast<int32_t>(data.below(static_cast<uint32_t>(st::kMl20mItems)));
      labels[i] = i % 5 == 0 ? 1.0f : 0.0f;
    }
    const st::Tensor x = st::Tensor::from_vector_i32(ids, {2, batch});
    const st::Tensor y = st::Tensor::from_vector(labels, {batch});
    st::BceWithLogits bce;
    const st::bench::PhaseMedians m = st::bench::time_phases(
        warmup, reps, [&] { bce.forward(model->forward(x), y); },
        [&] {
          flat.zero_grads();
          model->backward(bce.backward());
        },
        [&] { adam.step(); });
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    std::printf(
        "{\"bench\":\"ncf_step\",\"impl\":\"sparsetrain\",\"batch\":%d,\"threads\":%d,"
        "\"fwd_ms\":%.2f,\"bwd_ms\":%.2f,\"opt_ms\":%.2f,\"step_ms\":%.2f,\"peak_rss_mb\":%.1f}\n",
        batch, threads, m.fwd, m.bwd, m.opt, m.step, u.ru_maxrss / 1024.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ncf_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
