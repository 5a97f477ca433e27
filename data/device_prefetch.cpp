#include "data/device_prefetch.h"

#include <utility>

namespace st {

DevicePrefetcher::DevicePrefetcher(DataLoader& loader, Device device)
    : loader_(loader), uploader_(device) {}

void DevicePrefetcher::start_epoch(int64_t epoch, int64_t skip_batches) {
  loader_.start_epoch(epoch, skip_batches);
  started_ = false;
  ahead_.reset();
  error_ = nullptr;
}

void DevicePrefetcher::fetch() {
  try {
    std::optional<Batch> b = loader_.next();
    if (!b) return;
    InputUploader::Pending copy = uploader_.start({b->images, b->labels});
    ahead_ = Ahead{std::move(*b), std::move(copy)};
  } catch (...) {
    error_ = std::current_exception();
  }
}

std::optional<Batch> DevicePrefetcher::next() {
  if (device().is_cpu()) return loader_.next();
  if (!started_) {
    started_ = true;
    fetch();
  }
  if (error_) {
    const std::exception_ptr e = std::exchange(error_, nullptr);
    fetch();  // the batch after the failed one
    std::rethrow_exception(e);
  }
  if (!ahead_) return std::nullopt;
  Ahead current = std::move(*ahead_);
  ahead_.reset();
  fetch();  // this copy overlaps the step that is about to use `current`
  std::vector<Tensor> on_device = uploader_.finish(std::move(current.copy));
  Batch out = std::move(current.batch);
  out.images = on_device[0];
  out.labels = on_device[1];
  return out;
}

}  // namespace st
