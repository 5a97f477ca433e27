// Writes a model's parameters and buffers by name, a random input and the model's logits
// on it into one safetensors file, for a PyTorch twin to load and compare
// (bench/torch_cifar_models.py check). The forward runs in training mode (BatchNorm on
// batch statistics), the mode a training step uses, except for dropout, which is the
// identity: the twin cannot draw the same masks (the twin turns its dropout off too).
// With --eval the whole model runs in evaluation mode.
//   model_logits [--eval] ARCH CLASSES OUT.safetensors [BATCH] [SEED]
// With --checkpoint, the weights come from a checkpoint `sparsetrain train` wrote, the
// forward runs in evaluation mode (BatchNorm on the running statistics the checkpoint
// holds), and the file holds the input, the logits and what the loader restored as
// "loaded.<name>": the twin reads the weights from the checkpoint itself and compares
// (torch_cifar_models.py check OUT --checkpoint CKPT).
//   model_logits --checkpoint CKPT ARCH CLASSES OUT.safetensors [BATCH] [SEED]
// For ncf, CLASSES is the dataset's size USERS,ITEMS (with --checkpoint, the rows of the
// checkpoint's embedding tables instead) and the input BATCH random (user, item) pairs,
// int32 [2, BATCH] as NCF reads them (models/ncf.h).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "core/safetensors.h"
#include "layers/dropout.h"
#include "models/ncf.h"
#include "models/registry.h"
#include "train/checkpoint.h"

namespace {

constexpr const char* kUsage =
    "usage: model_logits [--eval | --checkpoint CKPT] ARCH CLASSES|USERS,ITEMS OUT.safetensors "
    "[BATCH] [SEED]\n";

// NCF's users and items: "USERS,ITEMS", or the rows of a checkpoint's GMF tables.
std::pair<int64_t, int64_t> ncf_size(const std::string& spec, const std::string& checkpoint) {
  if (!checkpoint.empty()) {
    const st::TensorFile f = st::load_safetensors(checkpoint);
    const st::Tensor* users = f.find("mf.embed.user.weight");
    const st::Tensor* items = f.find("mf.embed.item.weight");
    ST_CHECK(users != nullptr && items != nullptr, checkpoint,
             ": no mf.embed.user.weight and mf.embed.item.weight to size ncf from");
    return {users->shape()[0], items->shape()[0]};
  }
  const size_t comma = spec.find(',');
  const int64_t users = std::atoll(spec.c_str());
  const int64_t items = comma == std::string::npos ? 0 : std::atoll(spec.c_str() + comma + 1);
  ST_CHECK(users > 0 && items > 0, "model_logits: ncf takes USERS,ITEMS for CLASSES, got '", spec,
           "'");
  return {users, items};
}

// BATCH (user, item) pairs for ncf, BATCH images of the architecture's side otherwise.
st::Tensor random_input(const std::string& arch, int64_t batch, int64_t users, int64_t items,
                        st::Rng& rng) {
  if (arch == "ncf") {
    std::vector<int32_t> ids(static_cast<size_t>(2 * batch));
    for (int64_t i = 0; i < 2 * batch; ++i)
      ids[i] = static_cast<int32_t>(rng.below(static_cast<uint32_t>(i < batch ? users : items)));
    return st::Tensor::from_vector_i32(ids, st::Shape{2, batch});
  }
  const int64_t side = st::arch_info(arch).image_size;
  st::Tensor x = st::Tensor::empty(st::Shape{batch, 3, side, side});
  for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = rng.normal();
  return x;
}

int run(std::vector<std::string> args) {
  std::string checkpoint;
  bool eval = false;
  if (!args.empty() && args.front() == "--eval") {
    eval = true;
    args.erase(args.begin());
  } else if (!args.empty() && args.front() == "--checkpoint") {
    if (args.size() < 2) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    checkpoint = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  if (args.size() < 3 || args.size() > 5) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string arch = args[0], out = args[2];
  const bool ncf = arch == "ncf";
  const auto [users, items] = ncf ? ncf_size(args[1], checkpoint) : std::pair<int64_t, int64_t>{};
  const int64_t classes = ncf ? 1 : std::atoll(args[1].c_str());
  const int64_t batch = args.size() > 3 ? std::atoll(args[3].c_str()) : 2;
  const uint64_t seed = args.size() > 4 ? std::strtoull(args[4].c_str(), nullptr, 10) : 1;
  ST_CHECK(classes > 0 && batch > 0, "model_logits: CLASSES and BATCH must be positive, got ",
           classes, " and ", batch);
  st::Rng rng(seed);
  st::LayerPtr model = ncf ? st::ncf(users, items, rng) : st::make_model(arch, classes, 3, rng);
  const bool training = checkpoint.empty() && !eval;
  st::TensorFile file;
  if (!checkpoint.empty())
    st::load_checkpoint(checkpoint, *model, nullptr);  // weights only, strict names and shapes
  const std::string prefix = checkpoint.empty() ? "" : "loaded.";
  for (st::Param* p : st::collect_params(*model))
    file.tensors.emplace_back(prefix + p->name, p->value.clone());
  for (st::Buffer* b : st::collect_buffers(*model))
    file.tensors.emplace_back(prefix + b->name, b->value.clone());
  model->set_training(training);
  model->visit_layers([](st::Layer& l) {
    if (dynamic_cast<st::Dropout*>(&l) != nullptr) l.set_training(false);
  });
  st::Tensor x = random_input(arch, batch, users, items, rng);
  file.tensors.emplace_back("input", x);
  file.tensors.emplace_back("logits", model->forward(x));
  const std::string size =
      ncf ? std::to_string(users) + "," + std::to_string(items) : std::to_string(classes);
  file.metadata = {{"arch", arch}, {"classes", size}, {"training", training ? "1" : "0"}};
  st::save_safetensors(out, file);
  std::printf("%s: %zu tensors, logits %s\n", out.c_str(), file.tensors.size(),
              st::to_string(st::TensorSpec{file.tensors.back().second.shape()}).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
