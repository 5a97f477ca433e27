// One table of layer cases, run on every device in the manner of ggml's test-backend-ops:
// each case name becomes GradCheck.<name> (CPU finite differences), EmuVsCpu.<name> (the
// emulated device against the CPU, bit for bit: the same kernels) and CudaVsCpu.<name>
// (CUDA against the CPU within the row's tolerance; skips without a GPU), each a ctest
// entry. Several rows may share a name: the test runs every row of that name that applies
// to its device. Adding a layer means adding rows here.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "layers/conv2d.h"
#include "layers/layer.h"
#include "tests/gradcheck.h"

namespace st::test {

struct Tol {
  double atol = 1e-5;
  double rtol = 1e-4;
};
// Different summation orders in cuDNN's algorithms still leave FP32-level differences.
inline constexpr Tol kConvTol{5e-3, 5e-3};

struct LayerCase {
  std::string name;
  std::string label;  // tells rows of one name apart in failure messages ("bf16")
  std::function<LayerPtr()> make;
  // One step's input; the random ones draw from `rng` (fixed token ids ignore it).
  std::function<Tensor(Rng&)> input;
  // CPU finite-difference check at input(Rng(gradcheck_seed)) with these options.
  std::optional<GradCheckOptions> gradcheck;
  uint64_t gradcheck_seed = 7;
  // CUDA against the CPU within this tolerance (none: the row has no CUDA test).
  std::optional<Tol> cuda;
  bool training = true;
  int steps = 2;  // forward and backward steps of the device comparison
  // Run the CPU check and the emulated device once per CPU convolution algorithm
  // (im2col + GEMM, and oneDNN when built), set on every Conv2d inside.
  bool each_conv_algo = false;
};

const std::vector<LayerCase>& layer_cases();

// Two identically built copies, one moved to `device`, run `steps` forward and backward
// passes on the same random data; outputs, input gradients, parameter gradients (pre-filled,
// so accumulation is checked) and buffers must agree within `tol`, and every parameter on
// the device must announce gradient-ready exactly once per step.
// `algo` is set on every Conv2d of both copies.
void compare_with_cpu(const LayerCase& c, Device device, const Tol& tol,
                      CpuConvAlgo algo = CpuConvAlgo::Auto);

// cpu against dev (which must be on `device`) within tol: float tensors element by element, integer
// ones exactly.
void expect_close(const Tensor& cpu, const Tensor& dev, Device device, const Tol& tol,
                  const std::string& what);

// SoftmaxCrossEntropy (a loss, not a Layer) on `device` against the CPU over random
// logits [9, k] for k = 3, 10, 100: the mean loss within loss_tol, the number of hits
// exactly, and the gradient (scaled by 0.5) within grad_tol.
void compare_softmax_with_cpu(Device device, const Tol& loss_tol, const Tol& grad_tol);

// Registers `<suite>.<name>` for every case name with at least one row `applies` to;
// the test runs `run` on each such row, in table order.
void register_case_tests(const char* suite, const std::function<bool(const LayerCase&)>& applies,
                         const std::function<void(const LayerCase&)>& run);

// Sets `algo` on every Conv2d inside `layer`.
void set_conv_algo(Layer& layer, CpuConvAlgo algo);
// The CPU convolution algorithms a case runs with: every one this build has when
// `each_conv_algo`, else the default.
std::vector<CpuConvAlgo> conv_algos_for(const LayerCase& c);
const char* conv_algo_name(CpuConvAlgo algo);

}  // namespace st::test
