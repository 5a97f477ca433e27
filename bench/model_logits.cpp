// Writes a model's parameters and buffers by name, a random input and the model's logits
// on it into one safetensors file, for a PyTorch twin to load and compare
// (bench/torch_cifar_models.py check). The forward runs in training mode (BatchNorm on
// batch statistics), the mode a training step uses.
//   model_logits ARCH CLASSES OUT.safetensors [BATCH] [SEED]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/safetensors.h"
#include "models/registry.h"

namespace {

int run(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    std::fprintf(stderr, "usage: model_logits ARCH CLASSES OUT.safetensors [BATCH] [SEED]\n");
    return 2;
  }
  const std::string arch = argv[1], out = argv[3];
  const int64_t classes = std::atoll(argv[2]);
  const int64_t batch = argc > 4 ? std::atoll(argv[4]) : 2;
  const uint64_t seed = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 1;
  ST_CHECK(classes > 0 && batch > 0, "model_logits: CLASSES and BATCH must be positive, got ",
           classes, " and ", batch);
  st::Rng rng(seed);
  st::LayerPtr model = st::make_model(arch, classes, 3, rng);
  const int64_t side = st::arch_info(arch).image_size;
  st::TensorFile file;
  for (st::Param* p : st::collect_params(*model))
    file.tensors.emplace_back(p->name, p->value.clone());
  for (st::Buffer* b : st::collect_buffers(*model))
    file.tensors.emplace_back(b->name, b->value.clone());
  st::Tensor x = st::Tensor::empty(st::Shape{batch, 3, side, side});
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = rng.normal();
  file.tensors.emplace_back("input", x);
  file.tensors.emplace_back("logits", model->forward(x));
  file.metadata = {{"arch", arch}, {"classes", std::to_string(classes)}, {"training", "1"}};
  st::save_safetensors(out, file);
  std::printf("%s: %zu tensors, logits %s\n", out.c_str(), file.tensors.size(),
              st::to_string(st::TensorSpec{file.tensors.back().second.shape()}).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
