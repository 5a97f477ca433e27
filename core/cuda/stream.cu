#include "core/cuda/stream.h"

#include <memory>
#include <vector>

#include "core/cuda/check.h"
#include "core/device.h"

namespace st::cuda {

DeviceGuard::DeviceGuard(int device) {
  // A thread that never chose a GPU reports GPU 0: restoring that would open a context
  // there, so the thread first takes the process's device.
  bind_thread_to_process_device();
  ST_CUDA_CHECK(cudaGetDevice(&prev_));
  if (prev_ != device) {
    ST_CUDA_CHECK(cudaSetDevice(device));
    changed_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (changed_) (void)cudaSetDevice(prev_);  // destructors must not throw
}

Stream::Stream(int device, int priority) : device_(device) {
  DeviceGuard guard(device);
  ST_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
}

Stream::~Stream() {
  release();
}

Stream::Stream(Stream&& o) noexcept : stream_(o.stream_), device_(o.device_) {
  o.stream_ = nullptr;
}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    release();
    stream_ = o.stream_;
    device_ = o.device_;
    o.stream_ = nullptr;
  }
  return *this;
}

void Stream::release() noexcept {
  if (!stream_) return;
  // Finish queued work first: the caching allocator may hand this stream's blocks to
  // a later stream that happens to reuse the handle value.
  (void)cudaStreamSynchronize(stream_);
  (void)cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

void Stream::synchronize() const {
  ST_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

bool Stream::ready() const {
  const cudaError_t err = cudaStreamQuery(stream_);
  if (err == cudaErrorNotReady) return false;
  ST_CUDA_CHECK(err);
  return true;
}

void Stream::wait(const Event& e) const {
  ST_CUDA_CHECK(cudaStreamWaitEvent(stream_, e.get(), 0));
}

Event::Event(int device, bool timing) : device_(device), timing_(timing) {
  DeviceGuard guard(device);
  // Blocking sync: a host thread waiting in synchronize() sleeps instead of spinning a
  // core that the loader and the other threads need.
  const unsigned flags = cudaEventBlockingSync | (timing ? 0u : cudaEventDisableTiming);
  ST_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags));
}

Event::~Event() {
  release();
}

Event::Event(Event&& o) noexcept : event_(o.event_), device_(o.device_), timing_(o.timing_) {
  o.event_ = nullptr;
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    release();
    event_ = o.event_;
    device_ = o.device_;
    timing_ = o.timing_;
    o.event_ = nullptr;
  }
  return *this;
}

void Event::release() noexcept {
  if (event_) (void)cudaEventDestroy(event_);
  event_ = nullptr;
}

void Event::record(cudaStream_t stream) {
  ST_CUDA_CHECK(cudaEventRecord(event_, stream));
}

void Event::block(cudaStream_t stream) const {
  ST_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

void Event::synchronize() const {
  ST_CUDA_CHECK(cudaEventSynchronize(event_));
}

bool Event::ready() const {
  const cudaError_t err = cudaEventQuery(event_);
  if (err == cudaErrorNotReady) return false;
  ST_CUDA_CHECK(err);
  return true;
}

float Event::elapsed_ms(const Event& end) const {
  ST_CHECK(timing_ && end.timing_, "Event::elapsed_ms: both events need timing enabled");
  float ms = 0.0f;
  ST_CUDA_CHECK(cudaEventElapsedTime(&ms, event_, end.event_));
  return ms;
}

Context::Context(int device) : device_(device), own_(device), current_(own_.get()) {}

Context::~Context() {
  // Errors are ignored: at process exit the driver may already be shutting down.
  if (cudnn_) (void)cudnnDestroy(cudnn_);
  if (cublas_) (void)cublasDestroy(cublas_);
}

const Stream& Context::copy_stream() {
  if (!copy_) copy_.emplace(device_);
  return *copy_;
}

void Context::synchronize() const {
  ST_CUDA_CHECK(cudaStreamSynchronize(current_));
}

cudnnHandle_t Context::cudnn() {
  if (!cudnn_) {
    DeviceGuard guard(device_);
    ST_CUDNN_CHECK(cudnnCreate(&cudnn_));
    ST_CUDNN_CHECK(cudnnSetStream(cudnn_, current_));
    cudnn_stream_ = current_;
  } else if (cudnn_stream_ != current_) {
    ST_CUDNN_CHECK(cudnnSetStream(cudnn_, current_));
    cudnn_stream_ = current_;
  }
  return cudnn_;
}

cublasHandle_t Context::cublas() {
  if (!cublas_) {
    DeviceGuard guard(device_);
    ST_CUBLAS_CHECK(cublasCreate(&cublas_));
    // Scalars (alpha, beta) come from host memory in every sparsetrain call.
    ST_CUBLAS_CHECK(cublasSetPointerMode(cublas_, CUBLAS_POINTER_MODE_HOST));
    ST_CUBLAS_CHECK(cublasSetStream(cublas_, current_));
    cublas_stream_ = current_;
  } else if (cublas_stream_ != current_) {
    ST_CUBLAS_CHECK(cublasSetStream(cublas_, current_));
    cublas_stream_ = current_;
  }
  return cublas_;
}

Context& context(int device) {
  // Indexed by device; unique_ptr keeps each Context at a fixed address.
  thread_local std::vector<std::unique_ptr<Context>> contexts;
  ST_CHECK(device >= 0, "CUDA context: invalid device index ", device);
  if (static_cast<size_t>(device) >= contexts.size()) contexts.resize(device + 1);
  if (!contexts[device]) contexts[device] = std::make_unique<Context>(device);
  return *contexts[device];
}

StreamGuard::StreamGuard(cudaStream_t stream, int device)
    : ctx_(&context(device)), prev_(ctx_->stream()) {
  ctx_->set_stream(stream);
}

StreamGuard::~StreamGuard() {
  ctx_->set_stream(prev_);
}

}  // namespace st::cuda
