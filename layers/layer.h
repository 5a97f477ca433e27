// Layer: the Caffe / llm.c contract. forward() caches what backward() needs;
// backward() takes dL/dy, ACCUMULATES (+=) parameter gradients, calls
// mark_grad_ready() on each parameter once its gradient is final, and returns dL/dx.
// forward/backward dispatch on the input's device to the *_cpu or *_cuda overrides;
// a layer without a CUDA override fails loudly on a CUDA tensor. On the emulated device
// the *_cpu overrides run as a task on the calling thread's current stream
// (layers/emu_dispatch.h), with outputs and parameter gradients in device memory: queued
// without a wait where the layer infers its output (output_spec), else waited for.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/param.h"

// The device entry points of a layer with a CPU and a CUDA implementation, declared in
// one line in its class (the CUDA pair exists only in a build with the CUDA backend).
#ifdef SPARSETRAIN_WITH_CUDA
#define ST_LAYER_CPU_AND_CUDA                     \
  Tensor forward_cpu(const Tensor& x) override;   \
  Tensor backward_cpu(const Tensor& dy) override; \
  Tensor forward_cuda(const Tensor& x) override;  \
  Tensor backward_cuda(const Tensor& dy) override;
#else
#define ST_LAYER_CPU_AND_CUDA                   \
  Tensor forward_cpu(const Tensor& x) override; \
  Tensor backward_cpu(const Tensor& dy) override;
#endif

namespace st {

class Layer;

// A tensor's description without its memory: what shape inference produces.
struct TensorSpec {
  Shape shape;
  DType dtype = DType::F32;
  Layout layout = Layout::Plain;
  bool operator==(const TensorSpec&) const = default;
};
std::string to_string(const TensorSpec& spec);

using ParamVisitor = std::function<void(const std::string& name, Param& p)>;
// Called around each child's backward by containers: (dotted path, true at begin /
// false at end). The trainer uses it to draw per-layer backward spans on the timeline.
using BackwardObserver = std::function<void(const std::string& path, bool begin)>;
using BufferVisitor = std::function<void(const std::string& name, Buffer& b)>;

class Layer {
 public:
  virtual ~Layer() = default;

  // Short type name for errors and traces, e.g. "Conv2d(16->32, k3, s2)".
  virtual std::string describe() const = 0;

  virtual Tensor forward(const Tensor& x);
  virtual Tensor backward(const Tensor& dy);
  // Whether forward_cpu and backward_cpu take tensors in the blocked layout
  // (core/layout.h). A layer that does not gets them plain: forward() and backward()
  // convert for it, so only the layers that opt in ever see a blocked tensor.
  virtual bool takes_blocked() const { return false; }
  // Whether forward_cpu and backward_cpu take bfloat16 tensors (the activations between
  // the layers of a ResNet under --precision bf16, docs/PRECISION.md). A layer that does
  // not gets them widened to float32 by forward() and backward().
  virtual bool takes_bf16() const { return false; }
  // Shape inference apart from compute, as every GPU framework has it: what forward(x)
  // will return, from x's shape, type and layout alone (x's memory must not be read). On
  // the emulated device a layer that answers has its forward and backward queued on the
  // calling thread's current stream and the host returns at once, as with a GPU's kernel
  // launches; one that does not (the default, or an answer that needs state the work
  // itself builds first) runs as a task the host waits for. The answer is checked when the
  // task runs. The input gradient is taken to be described by taken_spec(x).
  virtual std::optional<TensorSpec> output_spec(const Tensor& /*x*/) const { return std::nullopt; }
  // Whether backward returns an input gradient (false for an input of token ids).
  virtual bool has_input_grad() const { return true; }
  // The parameters backward's input gradient reads (dx = dy W) after the layer has
  // announced their gradients: the CUDA layers launch the weight-gradient kernel, announce,
  // then launch the input-gradient kernel. A queued backward keeps that order on the
  // emulated device, so an optimiser step ordered only after the announcement (not after
  // the whole backward) is an error there.
  virtual std::vector<const Param*> read_after_announcing() const { return {}; }
  // Containers only route their children's calls: on the emulated device they run on the
  // host, so each child is queued on its own.
  virtual bool routes_on_host() const { return false; }

  // Visits own parameters/buffers with `prefix` prepended ("layer1.0.conv1." + "weight").
  virtual void visit_params(const std::string& prefix, const ParamVisitor& fn);
  virtual void visit_buffers(const std::string& prefix, const BufferVisitor& fn);
  virtual void set_training(bool training) { training_ = training; }
  // Calls `fn` on this layer and, in containers, on every layer inside (depth first).
  virtual void visit_layers(const std::function<void(Layer&)>& fn) { fn(*this); }
  // Containers pass the observer on to their children (leaves ignore it).
  virtual void set_backward_observer(const BackwardObserver&, const std::string& /*prefix*/) {}
  bool training() const { return training_; }
  // Moves parameters and buffers (values and gradients) to `device`.
  void to(Device device);

 protected:
  virtual Tensor forward_cpu(const Tensor& x) = 0;
  virtual Tensor backward_cpu(const Tensor& dy) = 0;
  virtual Tensor forward_cuda(const Tensor& x);
  virtual Tensor backward_cuda(const Tensor& dy);

  // Registration of own parameters and buffers under their local names.
  Param& add_param(const std::string& local_name, const Shape& shape, ParamKind kind);
  Buffer& add_buffer(const std::string& local_name, const Tensor& value);
  // Throws "<describe()>: expected <what> shape <want>, got <got>".
  void expect_shape(const char* what, const Shape& want, const Shape& got) const;
  void expect_rank(const Tensor& x, int rank, const char* layout) const;
  // What forward_cpu receives for x (layers/layer.cpp's conversions), as a description.
  TensorSpec taken_spec(const Tensor& x) const;
  // Blocks until the work this layer queued on the emulated device has run. A layer that
  // answers output_spec calls it first in its destructor: that work is the layer's own CPU
  // code and reads its members (a GPU kernel reads only device memory).
  void finish_queued_work() const noexcept;

  bool training_ = true;

 private:
  // unique_ptr keeps addresses stable: Param& handed out stays valid.
  std::vector<std::pair<std::string, std::unique_ptr<Param>>> params_;
  std::vector<std::pair<std::string, std::unique_ptr<Buffer>>> buffers_;
  // Set by a forward queued on the emulated device: its output and what its backward's
  // input gradient will be; empty after a forward the host waited for.
  struct Queued {
    TensorSpec y, dx;
  };
  std::optional<Queued> queued_;
  // This layer's queued tasks not yet run (counted by the tasks themselves, so no stream
  // work is added for it).
  struct QueuedTasks;
  std::shared_ptr<QueuedTasks> queued_tasks_;

  // Counts a task being queued; the returned guard, moved into the task, counts it done.
  std::shared_ptr<void> count_queued_task();
  Tensor queue_forward(const Tensor& x, const TensorSpec& y_spec);
  Tensor queue_backward(const Tensor& dy, const Queued& shapes);
};

using LayerPtr = std::unique_ptr<Layer>;

// Every parameter of `model` in forward order, with full names filled in.
std::vector<Param*> collect_params(Layer& model);
std::vector<Buffer*> collect_buffers(Layer& model);
int64_t count_params(Layer& model);

}  // namespace st
