// DataLoader: worker threads decode and augment whole batches ahead of the training
// loop, keeping up to `prefetch` ready batches in a bounded ring, and hand them out in
// sampler order. Augmentation randomness depends only on (seed, epoch, dataset index),
// so batches are bit-identical for any number of workers, and resuming mid-epoch
// (start_epoch with skip_batches) reproduces the uninterrupted run.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"
#include "data/sampler.h"

namespace st {

struct Batch {
  Tensor images;  // float32 [N, C, H, W]
  Tensor labels;  // int32 [N]
  int64_t epoch = 0;
  int64_t index = 0;  // batch number within the epoch
};

struct LoaderOptions {
  int64_t batch_size = 128;
  int workers = 2;         // 0 = load on the calling thread, no prefetching
  int prefetch = 0;        // ready batches kept ahead; 0 = 2 x workers
  uint64_t seed = 0;       // augmentation seed
  bool drop_last = false;  // drop a final partial batch
  // Assemble batches in page-locked memory, which the GPU copies from asynchronously
  // (data/device_prefetch.h); only for a CUDA device (a CPU run gains nothing from it).
  bool pin_memory = false;
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler,
             LoaderOptions options);
  // Stops the workers, also mid-epoch: each finishes at most its current sample.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Begins `epoch` in the sampler's order for that epoch, skipping its first
  // skip_batches batches (to resume mid-epoch). Work in flight for a previous epoch is
  // discarded.
  void start_epoch(int64_t epoch, int64_t skip_batches = 0);
  // The next batch of the current epoch, or nullopt after the last. A worker's error
  // (say a corrupt JPEG) is rethrown here as st::Error naming the file; the batch is
  // skipped and the following next() continues with the one after it.
  std::optional<Batch> next();

  int64_t batches_per_epoch() const;
  const Dataset& dataset() const { return *dataset_; }
  const DistributedSampler& sampler() const { return sampler_; }
  const LoaderOptions& options() const { return opt_; }

 private:
  struct Slot {
    int64_t batch = -1;  // which batch is ready here; -1 = none
    Batch data;
    std::exception_ptr error;
  };
  // Loads batch b of the epoch whose order is `order`; returns early (result unused)
  // when the generation moves on.
  Batch build(const std::vector<int64_t>& order, int64_t epoch, int64_t b, uint64_t gen) const;
  void worker_loop();

  std::shared_ptr<const Dataset> dataset_;
  DistributedSampler sampler_;
  LoaderOptions opt_;
  Shape example_shape_;

  std::mutex mu_;
  std::condition_variable work_cv_;   // workers wait for a batch to claim
  std::condition_variable ready_cv_;  // the consumer waits for its batch
  bool stop_ = false;
  // Bumped by start_epoch and shutdown; results of older generations are dropped.
  uint64_t generation_ = 0;
  std::atomic<uint64_t> live_generation_{0};
  int64_t epoch_ = -1;
  std::shared_ptr<const std::vector<int64_t>> order_;
  int64_t num_batches_ = 0, next_claim_ = 0, next_take_ = 0;
  std::vector<Slot> slots_;  // batch b goes to slots_[b % slots_.size()]
  std::vector<std::thread> threads_;
};

}  // namespace st
