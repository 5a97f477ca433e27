// Writes a small CSV dataset (two classes of 16x16 grey images: a bright square in the
// upper left or the lower right, with noise), then trains small_cnn on it through
// --dataset csv (registered in csv_dataset.cpp) for a few steps. Runs on one process or
// data parallel under mpirun.
//   train_csv [--data-dir DIR] [--max-iters N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include <sparsetrain/comm/communicator.h>
#include <sparsetrain/comm/mpi_communicator.h>
#include <sparsetrain/comm/mpi_env.h>
#include <sparsetrain/core/rng.h>
#include <sparsetrain/train/trainer.h>

namespace {

void write_split(const std::filesystem::path& file, int examples, uint64_t seed) {
  std::ofstream out(file);
  out << "1,16,16,2\n";
  st::Rng rng(seed);
  for (int e = 0; e < examples; ++e) {
    const int label = e % 2;
    out << label;
    for (int y = 0; y < 16; ++y)
      for (int x = 0; x < 16; ++x) {
        const bool lit = label == 0 ? (y < 8 && x < 8) : (y >= 8 && x >= 8);
        const int v = (lit ? 180 : 40) + static_cast<int>(rng.below(60));
        out << ',' << v;
      }
    out << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  st::set_mpi_env_defaults();
  st::TrainConfig c;
  c.arch = "small_cnn";
  c.dataset = "csv";
  c.data_dir = "csv_data";
  c.batch_size = 16;
  c.epochs = 1;
  c.max_iters = 4;
  c.lr = 0.05f;
  c.threads = 1;
  c.workers = 0;
  c.out = "csv_run";
  c.overwrite = true;
  c.quiet = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--data-dir")) {
      c.data_dir = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--max-iters")) {
      c.max_iters = std::atoll(argv[i + 1]);
    } else {
      std::fprintf(stderr, "train_csv: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  std::unique_ptr<st::Communicator> comm;
  try {
    comm = st::make_communicator("auto");
    if (comm->rank() == 0) {
      std::filesystem::create_directories(c.data_dir);
      write_split(std::filesystem::path(c.data_dir) / "train.csv", 128, 1);
      write_split(std::filesystem::path(c.data_dir) / "test.csv", 32, 2);
    }
    comm->barrier();
    const st::TrainResult r = st::train(c, *comm);
    if (comm->rank() == 0)
      std::printf("csv: %ld steps of small_cnn on %d ranks\n", static_cast<long>(r.steps),
                  comm->size());
    return r.steps == c.max_iters ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_csv: %s\n", e.what());
    std::fflush(stderr);
    if (comm && comm->size() > 1) st::MpiCommunicator::abort_job(1);  // no rank waits forever
    return 1;
  }
}
