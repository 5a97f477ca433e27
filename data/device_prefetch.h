// The loader's batches on the training device, one batch ahead. next() returns batch b,
// whose copy was started during the previous call, after starting the copy of batch b+1:
// that copy runs on the side stream while step b computes (core/upload.h). With a
// loader that assembles batches in page-locked memory (LoaderOptions::pin_memory) the
// copy needs no CPU time at all.
//
// On the CPU it is the loader itself: next() is DataLoader::next(), nothing is copied.
// Errors keep the loader's order: a batch that failed to load is reported by the next()
// that would have returned it, and the following next() continues after it.
#pragma once

#include <exception>
#include <optional>

#include "core/upload.h"
#include "data/loader.h"

namespace st {

class DevicePrefetcher {
 public:
  DevicePrefetcher(DataLoader& loader, Device device);

  Device device() const { return uploader_.device(); }
  // DataLoader::start_epoch; a copy started for the previous epoch is dropped.
  void start_epoch(int64_t epoch, int64_t skip_batches = 0);
  // The next batch with images and labels on the device, or nullopt after the last.
  std::optional<Batch> next();

 private:
  struct Ahead {
    Batch batch;  // the host batch (epoch, index) whose copy is under way
    InputUploader::Pending copy;
  };
  // Takes the loader's next batch and starts its copy (or notes the end or the error).
  void fetch();

  DataLoader& loader_;
  InputUploader uploader_;
  bool started_ = false;
  std::optional<Ahead> ahead_;
  std::exception_ptr error_;
};

}  // namespace st
