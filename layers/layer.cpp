#include "layers/layer.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <sstream>

#include "core/emu/launch.h"
#include "core/emu/ordering.h"
#include "core/emu/runtime.h"
#include "core/emu/stream.h"
#include "core/kernels/half.h"
#include "core/layout.h"
#include "layers/emu_dispatch.h"
#include "layers/forward_watch.h"

namespace st {

namespace {

// On the emulated device a layer's backward runs on a stream executor, but gradient-ready
// hooks belong to the host thread: the reducer's hook records an event on the host
// thread's current stream. For the scope of a task, the executor's announcements go to a
// list (grad_ready_sink) instead; the host announces them after queueing or running the
// task. Restores the previous sink (none) also when the task throws.
class CollectGradReady {
 public:
  explicit CollectGradReady(std::vector<Param*>& into) : prev_(grad_ready_sink()) {
    grad_ready_sink() = &into;
  }
  ~CollectGradReady() { grad_ready_sink() = prev_; }
  CollectGradReady(const CollectGradReady&) = delete;
  CollectGradReady& operator=(const CollectGradReady&) = delete;

 private:
  std::vector<Param*>* prev_;
};

// What a layer's CPU code receives: bfloat16 widened to float32 unless the layer takes
// it, blocked made plain unless it takes that.
Tensor as_taken(const Layer& layer, const Tensor& t) {
  const Tensor r =
      t.dtype() == DType::BF16 && !layer.takes_bf16() ? cpu::to_dtype(t, DType::F32) : t;
  return layer.takes_blocked() ? r : to_plain(r);
}

TensorSpec spec_of(const Tensor& t) {
  return {t.shape(), t.dtype(), t.layout()};
}

// Writes what a queued layer computed into the output the host handed out, after checking
// that the host's shape inference described it.
void deliver(const Layer& layer, const char* what, const Tensor& computed, const Tensor& out) {
  ST_CHECK(spec_of(computed) == spec_of(out), layer.describe(), ": its ", what, " is ",
           to_string(spec_of(computed)), " but its shape inference said ", to_string(spec_of(out)));
  Tensor o = out.as_host_memory();
  o.copy_from(computed);
}

bool on_emu_host_thread(const Tensor& t) {
  return t.device().is_emu() && emu::executing_device() != t.device().index;
}

}  // namespace

std::string to_string(const TensorSpec& spec) {
  std::ostringstream s;
  s << dtype_name(spec.dtype) << spec.shape << (spec.layout == Layout::Plain ? "" : " blocked");
  return s.str();
}

TensorSpec Layer::taken_spec(const Tensor& x) const {
  TensorSpec t = spec_of(x);
  if (t.dtype == DType::BF16 && !takes_bf16()) t.dtype = DType::F32;
  if (!takes_blocked()) t.layout = Layout::Plain;
  return t;
}

Tensor Layer::forward(const Tensor& x) {
  for (auto& [name, p] : params_)
    if (p->before_forward) p->before_forward(*p);
  if (x.device().is_cuda()) return forward_cuda(x);
  queued_.reset();
  if (on_emu_host_thread(x)) {
    if (routes_on_host()) return forward_cpu(x);
    if (std::optional<TensorSpec> y = output_spec(x)) return queue_forward(x, *y);
  }
  // On an emulated device the conversion is part of the layer's task.
  const auto body = [&] { return forward_cpu(as_taken(*this, x)); };
  if (x.device().is_emu()) return run_on_emu(x.device(), body);
  Tensor y = body();
  ForwardWatch::notify(*this, y);
  return y;
}

Tensor Layer::backward(const Tensor& dy) {
  if (dy.device().is_cuda()) return backward_cuda(dy);
  const auto body = [&] { return backward_cpu(as_taken(*this, dy)); };
  if (!dy.device().is_emu()) return body();
  // Inside a parent's task the parent collects the announcements.
  if (emu::executing_device() == dy.device().index) return run_on_emu(dy.device(), body);
  if (routes_on_host()) return backward_cpu(dy);
  if (queued_) return queue_backward(dy, *queued_);
  // The host waits for the task, then announces in the order backward reached each one.
  std::vector<Param*> announced;
  Tensor dx = run_on_emu(dy.device(), [&] {
    CollectGradReady collect(announced);
    return body();
  });
  for (Param* p : announced) p->mark_grad_ready();
  return dx;
}

struct Layer::QueuedTasks {
  std::mutex mu;
  std::condition_variable cv;
  int64_t pending = 0;
};

std::shared_ptr<void> Layer::count_queued_task() {
  if (!queued_tasks_) queued_tasks_ = std::make_shared<QueuedTasks>();
  std::shared_ptr<QueuedTasks> q = queued_tasks_;
  {
    std::lock_guard<std::mutex> lock(q->mu);
    ++q->pending;
  }
  // Released when the task has run (or is dropped), whatever it threw.
  return std::shared_ptr<void>(nullptr, [q](void*) {
    std::lock_guard<std::mutex> lock(q->mu);
    --q->pending;
    q->cv.notify_all();
  });
}

void Layer::finish_queued_work() const noexcept {
  if (!queued_tasks_) return;
  std::unique_lock<std::mutex> lock(queued_tasks_->mu);
  queued_tasks_->cv.wait(lock, [&] { return queued_tasks_->pending == 0; });
}

// The layer's forward as one queued task writing into an output sized on the host. The
// task holds the input and the output (the memory stays valid until it has run) and the
// layer, which outlives its queued work as a CUDA module outlives its kernels.
Tensor Layer::queue_forward(const Tensor& x, const TensorSpec& y_spec) {
  const Device d = x.device();
  Tensor y = Tensor::empty(y_spec.shape, y_spec.dtype, d).with_layout(y_spec.layout);
  emu::launch(d.index, [this, x, y, counted = count_queued_task()] {
    deliver(*this, "output", forward_cpu(as_taken(*this, x)), y);
  });
  queued_ = Queued{y_spec, taken_spec(x)};
  return y;
}

// The layer's backward as a queued task; the host announces the layer's gradients right
// after queueing it, so an event the reducer records then follows the task. Inside the
// task the layer's own announcements are collected and must name the same parameters.
// A layer whose input gradient reads weights after the announcement (read_after_announcing)
// has its input gradient delivered by a second task, queued after the announcement as the
// CUDA layer launches its input-gradient kernel, and noted as reading those weights: an
// update that is not ordered after it is an error (core/emu/ordering.h).
Tensor Layer::queue_backward(const Tensor& dy, const Queued& shapes) {
  // Checked on the host before anything is queued or announced, as a GPU layer checks
  // its arguments before launching.
  expect_shape("gradient", shapes.y.shape, dy.shape());
  const TensorSpec& dx_spec = shapes.dx;
  const Device d = dy.device();
  std::vector<Param*> own;
  for (auto& [name, p] : params_) own.push_back(p.get());
  Tensor dx;
  if (has_input_grad())
    dx = Tensor::empty(dx_spec.shape, dx_spec.dtype, d).with_layout(dx_spec.layout);
  std::vector<const Param*> late;
  if (dx.defined()) late = read_after_announcing();
  // The first task's input gradient, for the second to deliver.
  auto computed = std::make_shared<Tensor>();
  emu::launch(
      d.index, [this, dy, dx, own, computed, split = !late.empty(), counted = count_queued_task()] {
        std::vector<Param*> announced;
        {
          CollectGradReady collect(announced);
          *computed = backward_cpu(as_taken(*this, dy));
        }
        std::vector<Param*> want = own;
        std::sort(announced.begin(), announced.end());
        std::sort(want.begin(), want.end());
        ST_CHECK(announced == want, describe(), ": its backward announced ", announced.size(),
                 " gradients, but the layer owns ", want.size(), " parameters");
        if (dx.defined() && !split) deliver(*this, "input gradient", *computed, dx);
      });
  queued_.reset();
  // In registration order, as the layers' own code announces them.
  for (Param* p : own) p->mark_grad_ready();
  if (late.empty()) return dx;
  emu::launch(d.index, [this, dx, computed, counted = count_queued_task()] {
    deliver(*this, "input gradient", *computed, dx);
  });
  for (const Param* p : late)
    emu::note_read(emu::current_stream(d.index), p->value.block_address(), p->value.nbytes(),
                   describe() + "'s input-gradient kernel");
  return dx;
}

namespace {
thread_local ForwardWatch* active_watch = nullptr;
}  // namespace

ForwardWatch::ForwardWatch(Fn fn) : fn_(std::move(fn)), previous_(active_watch) {
  active_watch = this;
}

ForwardWatch::~ForwardWatch() {
  active_watch = previous_;
}

void ForwardWatch::notify(const Layer& layer, const Tensor& y) {
  if (active_watch != nullptr) active_watch->fn_(layer, y);
}

Tensor Layer::forward_cuda(const Tensor&) {
  ST_THROW(describe(), ": no CUDA implementation in this build");
}

Tensor Layer::backward_cuda(const Tensor&) {
  ST_THROW(describe(), ": no CUDA implementation in this build");
}

void Layer::visit_params(const std::string& prefix, const ParamVisitor& fn) {
  for (auto& [name, p] : params_) fn(prefix + name, *p);
}

void Layer::visit_buffers(const std::string& prefix, const BufferVisitor& fn) {
  for (auto& [name, b] : buffers_) fn(prefix + name, *b);
}

void Layer::to(Device device) {
  visit_params("", [&](const std::string&, Param& p) {
    p.value = p.value.to(device);
    p.grad = p.grad.to(device);
  });
  visit_buffers("", [&](const std::string&, Buffer& b) { b.value = b.value.to(device); });
}

Param& Layer::add_param(const std::string& local_name, const Shape& shape, ParamKind kind) {
  auto p = std::make_unique<Param>();
  p->value = Tensor::zeros(shape);
  p->grad = Tensor::zeros(shape);
  p->kind = kind;
  p->name = local_name;
  params_.emplace_back(local_name, std::move(p));
  return *params_.back().second;
}

Buffer& Layer::add_buffer(const std::string& local_name, const Tensor& value) {
  auto b = std::make_unique<Buffer>();
  b->value = value;
  b->name = local_name;
  buffers_.emplace_back(local_name, std::move(b));
  return *buffers_.back().second;
}

void Layer::expect_shape(const char* what, const Shape& want, const Shape& got) const {
  ST_CHECK(want == got, describe(), ": expected ", what, " shape ", want, ", got ", got);
}

void Layer::expect_rank(const Tensor& x, int rank, const char* layout) const {
  ST_CHECK(x.rank() == rank, describe(), ": expected a rank-", rank, " input ", layout,
           ", got shape ", x.shape());
}

std::vector<Param*> collect_params(Layer& model) {
  std::vector<Param*> out;
  model.visit_params("", [&](const std::string& name, Param& p) {
    p.name = name;
    p.index = static_cast<int>(out.size());
    out.push_back(&p);
  });
  return out;
}

std::vector<Buffer*> collect_buffers(Layer& model) {
  std::vector<Buffer*> out;
  model.visit_buffers("", [&](const std::string& name, Buffer& b) {
    b.name = name;
    out.push_back(&b);
  });
  return out;
}

int64_t count_params(Layer& model) {
  int64_t n = 0;
  for (Param* p : collect_params(model)) n += p->value.numel();
  return n;
}

}  // namespace st
