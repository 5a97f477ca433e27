// One training step of a model (forward + backward + SGD) on random data: median step
// time and peak resident memory. The PyTorch peer is bench/torch_train_step.py and
// bench/compare_train_step.py runs both in one go (bench/compare_precision.py for
// --precision bf16 against PyTorch's CPU autocast).
//   train_step_bench [--arch resnet20] [--batch 128] [--size 32] [--reps 20] [--threads 2]
//                    [--precision fp32|bf16|fp16]
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/phase_timing.h"
#include "core/parallel.h"
#include "layers/flat_params.h"
#include "layers/precision.h"
#include "layers/softmax_cross_entropy.h"
#include "models/registry.h"
#include "optim/sgd.h"

int main(int argc, char** argv) {
  st::set_openmp_env_defaults(argv);  // the CLI's OpenMP wait policy, so steps time alike
  std::string arch = "resnet20", precision = "fp32";
  int batch = 128, size = 32, reps = 20, threads = 2, warmup = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--arch")
      arch = argv[i + 1];
    else if (f == "--batch")
      batch = std::atoi(argv[i + 1]);
    else if (f == "--size")
      size = std::atoi(argv[i + 1]);
    else if (f == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (f == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (f == "--precision")
      precision = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "train_step_bench: unknown flag %s (--arch --batch --size --reps --threads "
                   "--precision)\n",
                   argv[i]);
      return 2;
    }
  }
  try {
    st::set_num_threads(threads);
    st::Rng rng(0);
    st::LayerPtr model = st::make_model(arch, 10, 3, rng, size);
    st::FlatParams flat(*model, st::Device::cpu());
    st::set_model_precision(*model, st::parse_precision(precision, "--precision"));
    st::SgdOptions so;
    so.lr = 0.01f;
    so.momentum = 0.9f;
    so.weight_decay = 1e-4f;
    st::Sgd sgd(flat.params(), so);
    st::Tensor x = st::Tensor::empty({batch, 3, size, size});
    st::Rng data(1);
    for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = data.normal();
    std::vector<int32_t> labels(batch);
    for (int i = 0; i < batch; ++i) labels[i] = i % 10;
    st::Tensor y = st::Tensor::from_vector_i32(labels, {batch});
    st::SoftmaxCrossEntropy ce;
    const st::bench::PhaseMedians m = st::bench::time_phases(
        warmup, reps, [&] { ce.forward(model->forward(x), y); },
        [&] {
          flat.zero_grads();
          model->backward(ce.backward());
        },
        [&] { sgd.step(); });
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    std::printf(
        "{\"bench\":\"train_step\",\"impl\":\"sparsetrain\",\"precision\":\"%s\",\"arch\":\"%s\","
        "\"batch\":%d,\"size\":%d,"
        "\"threads\":%d,\"fwd_ms\":%.2f,\"bwd_ms\":%.2f,\"opt_ms\":%.2f,\"step_ms\":%.2f,"
        "\"peak_rss_mb\":%.1f}\n",
        precision.c_str(), arch.c_str(), batch, size, threads, m.fwd, m.bwd, m.opt, m.step,
        u.ru_maxrss / 1024.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
