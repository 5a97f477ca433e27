// Forward + backward time of each ResNet-20 convolution shape (batch 128, 32x32 input,
// 16/32/64 channels) on the CPU. Prints one JSON object per shape.
//   conv_bench [--reps R] [--threads T] [--batch N]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "core/timer.h"
#include "layers/conv2d.h"

namespace {

struct Shape2 {
  const char* name;
  int cin, cout, hw, stride, count;  // count: occurrences in ResNet-20
};

// ResNet-20 (He et al. 2016, sec. 4.2): stem, then 3 stages of 3 blocks x 2 convs.
const Shape2 kShapes[] = {
    {"stem_3_16_32", 3, 16, 32, 1, 1},  {"c16_16_32", 16, 16, 32, 1, 6},
    {"c16_32_32_s2", 16, 32, 32, 2, 1}, {"c32_32_16", 32, 32, 16, 1, 5},
    {"c32_64_16_s2", 32, 64, 16, 2, 1}, {"c64_64_8", 64, 64, 8, 1, 5},
};

}  // namespace

int main(int argc, char** argv) {
  int reps = 10, threads = 2, batch = 128;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--batch"))
      batch = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "conv_bench: unknown flag %s (flags: --reps --threads --batch)\n",
                   argv[i]);
      return 2;
    }
  }
  st::set_num_threads(threads);
  st::Rng rng(0);
  for (const Shape2& s : kShapes) {
    st::Conv2d conv(s.cin, s.cout, 3, s.stride, 1, false, rng);
    st::Tensor x = st::Tensor::full({batch, s.cin, s.hw, s.hw}, 0.5f);
    st::Tensor y = conv.forward(x);
    st::Tensor dy = st::Tensor::full(y.shape(), 0.1f);
    conv.backward(dy);  // warm-up
    std::vector<double> fwd, bwd;
    for (int r = 0; r < reps; ++r) {
      st::Timer t;
      conv.forward(x);
      fwd.push_back(t.ms());
      t.reset();
      conv.backward(dy);
      bwd.push_back(t.ms());
    }
    std::sort(fwd.begin(), fwd.end());
    std::sort(bwd.begin(), bwd.end());
    std::printf(
        "{\"bench\":\"conv\",\"impl\":\"sparsetrain\",\"shape\":\"%s\",\"batch\":%d,\"threads\":%d,"
        "\"count\":%d,\"fwd_ms\":%.3f,\"bwd_ms\":%.3f,\"total_ms\":%.3f}\n",
        s.name, batch, threads, s.count, fwd[reps / 2], bwd[reps / 2],
        fwd[reps / 2] + bwd[reps / 2]);
    std::fflush(stdout);
  }
  return 0;
}
