#include "data/loader.h"

#include <algorithm>
#include <string>
#include "core/device.h"

namespace st {

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler,
                       LoaderOptions options)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), opt_(options) {
  ST_CHECK(dataset_ != nullptr, "DataLoader: no dataset");
  ST_CHECK(sampler_.dataset_size() == dataset_->size(), "DataLoader: sampler covers ",
           sampler_.dataset_size(), " examples but ", dataset_->name(), " has ", dataset_->size());
  ST_CHECK(opt_.batch_size > 0, "DataLoader: batch size must be > 0, got ", opt_.batch_size);
  ST_CHECK(opt_.workers >= 0 && opt_.prefetch >= 0, "DataLoader: workers (", opt_.workers,
           ") and prefetch (", opt_.prefetch, ") must be >= 0");
  example_shape_ = dataset_->example_shape();
  if (opt_.workers == 0) return;
  slots_.resize(static_cast<size_t>(opt_.prefetch > 0 ? opt_.prefetch : 2 * opt_.workers));
  threads_.reserve(static_cast<size_t>(opt_.workers));
  for (int i = 0; i < opt_.workers; ++i) threads_.emplace_back([this] { worker_loop(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    ++generation_;
    live_generation_ = generation_;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int64_t DataLoader::batches_per_epoch() const {
  int64_t n = sampler_.num_samples(), b = opt_.batch_size;
  return opt_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::start_epoch(int64_t epoch, int64_t skip_batches) {
  ST_CHECK(epoch >= 0, "DataLoader: epoch must be >= 0, got ", epoch);
  const int64_t batches = batches_per_epoch();
  ST_CHECK(skip_batches >= 0 && skip_batches <= batches, "DataLoader: cannot skip ", skip_batches,
           " batches of an epoch of ", batches);
  auto order = std::make_shared<const std::vector<int64_t>>(sampler_.indices(epoch));
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++generation_;
    live_generation_ = generation_;
    epoch_ = epoch;
    order_ = std::move(order);
    num_batches_ = batches;
    next_claim_ = next_take_ = skip_batches;
    for (Slot& s : slots_) s = Slot{};
  }
  work_cv_.notify_all();
}

Batch DataLoader::build(const std::vector<int64_t>& order, int64_t epoch, int64_t b,
                        uint64_t gen) const {
  const int64_t begin = b * opt_.batch_size;
  const int64_t n = std::min<int64_t>(opt_.batch_size, static_cast<int64_t>(order.size()) - begin);
  std::vector<int64_t> dims = {n};
  dims.insert(dims.end(), example_shape_.dims().begin(), example_shape_.dims().end());
  Batch out;
  out.epoch = epoch;
  out.index = b;
  out.images = opt_.pin_memory ? Tensor::empty_pinned(Shape(dims)) : Tensor::empty(Shape(dims));
  out.labels =
      opt_.pin_memory ? Tensor::empty_pinned({n}, DType::I32) : Tensor::empty({n}, DType::I32);
  float* img = out.images.f32();
  int32_t* lab = out.labels.data<int32_t>();
  const int64_t per = example_shape_.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (live_generation_.load(std::memory_order_relaxed) != gen) break;  // abandoned
    const int64_t idx = order[begin + i];
    SampleRng rng(opt_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(idx));
    try {
      lab[i] = dataset_->get_into(idx, rng, img + i * per);
    } catch (const std::exception& e) {
      throw Error("data loader: epoch " + std::to_string(epoch) + ", batch " + std::to_string(b) +
                  ", example " + std::to_string(idx) + ": " + e.what());
    }
  }
  return out;
}

void DataLoader::worker_loop() {
  bind_thread_to_process_device();  // batches may be page-locked for the GPU
  std::unique_lock<std::mutex> lk(mu_);
  const int64_t ring = static_cast<int64_t>(slots_.size());
  for (;;) {
    work_cv_.wait(lk, [&] {
      return stop_ || (next_claim_ < num_batches_ && next_claim_ < next_take_ + ring);
    });
    if (stop_) return;
    const int64_t b = next_claim_++;
    const uint64_t gen = generation_;
    const int64_t epoch = epoch_;
    std::shared_ptr<const std::vector<int64_t>> order = order_;
    lk.unlock();
    Slot done;
    done.batch = b;
    try {
      done.data = build(*order, epoch, b, gen);
    } catch (...) {
      done.error = std::current_exception();
    }
    lk.lock();
    if (gen != generation_) continue;  // a new epoch started meanwhile
    // Batch b - ring was taken before b could be claimed, so this slot is free.
    slots_[b % ring] = std::move(done);
    ready_cv_.notify_all();
  }
}

std::optional<Batch> DataLoader::next() {
  ST_CHECK(epoch_ >= 0, "DataLoader: call start_epoch(epoch) before next()");
  if (threads_.empty()) {
    // Synchronous mode: the caller's thread does the work.
    if (next_take_ >= num_batches_) return std::nullopt;
    const int64_t b = next_take_++;
    return build(*order_, epoch_, b, live_generation_.load());
  }
  std::unique_lock<std::mutex> lk(mu_);
  if (next_take_ >= num_batches_) return std::nullopt;
  const int64_t b = next_take_;
  Slot& s = slots_[b % static_cast<int64_t>(slots_.size())];
  ready_cv_.wait(lk, [&] { return s.batch == b; });
  Slot taken = std::move(s);
  s = Slot{};
  ++next_take_;
  lk.unlock();
  work_cv_.notify_all();
  if (taken.error) std::rethrow_exception(taken.error);
  return std::move(taken.data);
}

}  // namespace st
