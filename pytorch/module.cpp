// The Python extension _sparsetrain_torch: DdpHookState over a c10d process group, for the
// comm hook in sparsetrain_torch/__init__.py. The only translation unit that sees both
// pybind11 and ATen tensors; everything else is the project's own types.
#include <torch/extension.h>

#include <memory>
#include <string>
#include <variant>

#include "core/error.h"
#include "pytorch/ddp_hook_state.h"
#include "pytorch/process_group_communicator.h"
#include "sparsify/registry.h"

namespace py = pybind11;

namespace st {
namespace {

using Group = c10::intrusive_ptr<c10d::ProcessGroup>;

// A DdpHookState and the communicator over the group it last exchanged on.
class PyHookState {
 public:
  explicit PyHookState(const DdpHookOptions& o) : state_(o) {}

  void exchange(int index, at::Tensor buffer, const std::vector<at::Tensor>& grads,
                int64_t iteration, const Group& group) {
    const std::string& method = state_.options().method;
    ST_CHECK(buffer.device().is_cpu() && buffer.scalar_type() == at::kFloat, "bucket ", index,
             " is ", c10::toString(buffer.scalar_type()), " on ", buffer.device().str(),
             "; sparsetrain_torch exchanges float32 CPU buckets with ", method,
             " (keep the DDP model in float32 on the CPU)");
    // DDP's bucket buffer is contiguous; anything else is exchanged through a copy.
    at::Tensor flat = buffer.is_contiguous() ? buffer : buffer.contiguous();
    Tensor view = Tensor::borrow(flat.data_ptr(), {flat.numel()}, DType::F32);
    std::vector<DdpTensor> tensors;
    const auto* base = static_cast<const char*>(flat.data_ptr());
    for (const at::Tensor& g : grads) {
      // Gradients that are views of the buffer give the tensors of --sp scope=tensor.
      const auto* p = static_cast<const char*>(g.data_ptr());
      if (!g.is_contiguous() || p < base || p + g.nbytes() > base + flat.nbytes()) continue;
      tensors.push_back({(p - base) / 4, g.sizes().vec()});
    }
    state_.exchange(index, view, tensors, comm(group), iteration);
    if (!flat.is_same(buffer)) buffer.copy_(flat.view_as(buffer));
  }
  void finish_step() { state_.finish_step(); }
  py::dict stats() const {
    py::dict d;
    for (const auto& [name, value] : state_.stats())
      std::visit([&](const auto& v) { d[py::str(name)] = v; }, value);
    return d;
  }
  py::bytes save_row() const {
    const std::vector<uint8_t> b = state_.save_row();
    return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void load_rows(const std::vector<std::string>& rows, const Group& group) {
    std::vector<std::vector<uint8_t>> bytes;
    for (const std::string& r : rows) bytes.emplace_back(r.begin(), r.end());
    state_.load_rows(bytes, comm(group));
  }
  // A copy of the bucket's residual, or None before the bucket's first exchange.
  py::object residual(int index) const {
    const Tensor r = state_.residual(index);
    if (!r.defined()) return py::none();
    return py::cast(
        at::from_blob(const_cast<void*>(r.block_address()), {r.numel()}, at::kFloat).clone());
  }
  int world_size() const { return state_.options().world_size; }

 private:
  Communicator& comm(const Group& group) {
    if (!comm_ || group.get() != group_.get()) {
      comm_ = std::make_unique<ProcessGroupCommunicator>(group);
      group_ = group;
    }
    return *comm_;
  }

  DdpHookState state_;
  Group group_;
  std::unique_ptr<Communicator> comm_;
};

}  // namespace
}  // namespace st

PYBIND11_MODULE(_sparsetrain_torch, m) {
  m.doc() = "sparsetrain's sparsifiers as a PyTorch DDP comm hook (the C++ core)";
  // st::Error is the one-line refusal: a Python ValueError with the same line.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const st::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  m.def("sparsifier_names", &st::sparsifier_names, "every method the registry lists");
  py::class_<st::PyHookState>(m, "_State")
      .def(py::init([](const std::string& method, double density,
                       const std::map<std::string, std::string>& sp, uint64_t seed,
                       int64_t dense_warmup_iters, int world_size) {
             return std::make_unique<st::PyHookState>(
                 st::DdpHookOptions{method, density, sp, seed, dense_warmup_iters, world_size});
           }),
           py::arg("method"), py::arg("density"), py::arg("sp"), py::arg("seed"),
           py::arg("dense_warmup_iters"), py::arg("world_size"))
      .def("exchange", &st::PyHookState::exchange, py::call_guard<py::gil_scoped_release>())
      .def("finish_step", &st::PyHookState::finish_step)
      .def("stats", &st::PyHookState::stats)
      .def("save_row", &st::PyHookState::save_row)
      .def("load_rows", &st::PyHookState::load_rows)
      .def("residual", &st::PyHookState::residual)
      .def_property_readonly("world_size", &st::PyHookState::world_size);
}
