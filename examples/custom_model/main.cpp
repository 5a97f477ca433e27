// Trains --arch tiny_resnet (registered in tiny_resnet.cpp) with the library's training
// loop: synthetic 32x32 images, MiCRO at density 0.01, data parallel over the ranks
// mpirun starts. Rank 0 prints the steps run; the metrics land in --out.
//   train_tiny_resnet [--max-iters N] [--sparsifier NAME] [--out DIR]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <sparsetrain/comm/communicator.h>
#include <sparsetrain/comm/mpi_communicator.h>
#include <sparsetrain/comm/mpi_env.h>
#include <sparsetrain/core/build_info.h>
#include <sparsetrain/models/registry.h>
#include <sparsetrain/train/trainer.h>

int main(int argc, char** argv) {
  st::set_mpi_env_defaults();
  st::TrainConfig c;
  c.arch = "tiny_resnet";
  c.dataset = "synthetic";
  c.synthetic_size = 512;
  c.test_subset = 64;
  c.batch_size = 16;
  c.epochs = 1;
  c.max_iters = 5;
  c.lr = 0.05f;
  c.threads = 1;
  c.workers = 0;
  c.sparsifier = "micro";
  c.density = 0.01;
  c.out = "tiny_resnet_run";
  c.overwrite = true;
  c.quiet = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--max-iters")) {
      c.max_iters = std::atoll(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--sparsifier")) {
      c.sparsifier = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--out")) {
      c.out = argv[i + 1];
    } else {
      std::fprintf(stderr, "train_tiny_resnet: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  std::unique_ptr<st::Communicator> comm;
  try {
    comm = st::make_communicator("auto");
    const st::TrainResult r = st::train(c, *comm);
    if (comm->rank() == 0)
      std::printf("tiny_resnet: sparsetrain %s, %ld steps on %d ranks with %s\n",
                  st::build_info().version.c_str(), static_cast<long>(r.steps), comm->size(),
                  c.sparsifier.c_str());
    if (r.steps != c.max_iters) {
      std::fprintf(stderr, "train_tiny_resnet: expected %ld steps, ran %ld\n",
                   static_cast<long>(c.max_iters), static_cast<long>(r.steps));
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_tiny_resnet: %s\n", e.what());
    std::fflush(stderr);
    if (comm && comm->size() > 1) st::MpiCommunicator::abort_job(1);  // no rank waits forever
    return 1;
  }
  return 0;
}
