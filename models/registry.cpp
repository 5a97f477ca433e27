#include "models/registry.h"

#include <functional>
#include <sstream>

#include "models/googlenet.h"
#include "models/inception_v4.h"
#include "models/ncf.h"
#include "models/resnet_cifar.h"
#include "models/resnet_imagenet.h"
#include "models/senet.h"
#include "models/small_cnn.h"
#include "models/vgg.h"

namespace st {

namespace {

using Factory = ModelFactory;

struct Entry {
  ArchInfo info;
  Factory make;
};

Factory cifar(int depth) {
  return
      [depth](int64_t k, int64_t c, int64_t, Rng& rng) { return cifar_resnet(depth, k, c, rng); };
}
Factory imagenet(int depth) {
  return [depth](int64_t k, int64_t c, int64_t, Rng& rng) {
    return imagenet_resnet(depth, k, c, rng);
  };
}
Factory vgg(int depth) {
  return [depth](int64_t k, int64_t c, int64_t, Rng& rng) { return vgg_cifar(depth, k, c, rng); };
}

std::vector<Entry>& entries() {
  static std::vector<Entry> table = {
      {{"resnet20", "CIFAR ResNet-20 (He et al. 2016 sec. 4.2, option A), 0.27M params", 32},
       cifar(20)},
      {{"resnet32", "CIFAR ResNet-32 (option A), 0.46M params", 32}, cifar(32)},
      {{"resnet44", "CIFAR ResNet-44 (option A), 0.66M params", 32}, cifar(44)},
      {{"resnet56", "CIFAR ResNet-56 (option A), 0.85M params", 32}, cifar(56)},
      {{"resnet110", "CIFAR ResNet-110 (option A), 1.7M params", 32}, cifar(110)},
      {{"resnet18_cifar", "CIFAR ResNet-18 of MiCRO/ExDyna (kuangliu), 11.2M params", 32},
       [](int64_t k, int64_t c, int64_t, Rng& rng) { return cifar_resnet18(k, c, rng); }},
      {{"resnet152_cifar", "CIFAR ResNet-152 of MiCRO (kuangliu, Bottleneck), 58.2M params", 32},
       [](int64_t k, int64_t c, int64_t, Rng& rng) { return cifar_resnet152(k, c, rng); }},
      {{"googlenet", "CIFAR GoogLeNet of MiCRO/ExDyna/SIDCo (kuangliu), 6.2M params", 32},
       [](int64_t k, int64_t c, int64_t, Rng& rng) { return cifar_googlenet(k, c, rng); }},
      {{"inception_v4", "Inception-v4 for 32x32 input of ExDyna (pytorch-cifar100), 41.2M params",
        32},
       [](int64_t k, int64_t c, int64_t, Rng& rng) { return inception_v4(k, c, rng); }},
      {{"senet18", "CIFAR SENet-18 of MiCRO/ExDyna/SIDCo (kuangliu), 11.3M params", 32},
       [](int64_t k, int64_t c, int64_t, Rng& rng) { return cifar_senet18(k, c, rng); }},
      {{"se_resnet18", "CIFAR ResNet-18 with squeeze-and-excitation, 11.3M params", 32},
       [](int64_t k, int64_t c, int64_t, Rng& rng) { return cifar_se_resnet18(k, c, rng); }},
      {{"vgg11", "CIFAR VGG-11 with BatchNorm", 32}, vgg(11)},
      {{"vgg13", "CIFAR VGG-13 with BatchNorm", 32}, vgg(13)},
      {{"vgg16", "CIFAR VGG-16 with BatchNorm, 14.7M params", 32}, vgg(16)},
      {{"vgg19", "CIFAR VGG-19 with BatchNorm", 32}, vgg(19)},
      {{"resnet18", "ImageNet ResNet-18 (torchvision), 11.7M params", 224}, imagenet(18)},
      {{"resnet34", "ImageNet ResNet-34 (torchvision), 21.8M params", 224}, imagenet(34)},
      {{"resnet50", "ImageNet ResNet-50 (torchvision v1.5), 25.6M params", 224}, imagenet(50)},
      {{"resnet101", "ImageNet ResNet-101 (torchvision v1.5), 44.5M params", 224}, imagenet(101)},
      {{"resnet152", "ImageNet ResNet-152 (torchvision v1.5), 60.2M params", 224}, imagenet(152)},
      {{"small_cnn", "two conv-BN-ReLU-pool blocks + linear for 28x28 input, 50k params", 28},
       [](int64_t k, int64_t c, int64_t s, Rng& rng) { return small_cnn(k, c, s, rng); }},
      // NCF's size follows its dataset's users and items, which (classes, channels, image
      // size) cannot carry: this row builds the MovieLens-20M model (the listing, --arch
      // validation); NCF training builds ncf(users, items) from its dataset's counts.
      {{"ncf", "NeuMF recommender (He et al. 2017, MLPerf), MovieLens-20M sizes, 31.8M params", 0},
       [](int64_t, int64_t, int64_t, Rng& rng) { return ncf(kMl20mUsers, kMl20mItems, rng); }},
  };
  return table;
}

const Entry& find(const std::string& arch) {
  for (const Entry& e : entries())
    if (e.info.name == arch) return e;
  std::ostringstream valid;
  for (const Entry& e : entries()) valid << (&e == &entries().front() ? "" : ", ") << e.info.name;
  ST_THROW("unknown --arch '", arch, "'; valid: ", valid.str());
}

// The ArchInfo column of entries(), kept in step by register_model.
std::vector<ArchInfo>& infos() {
  static std::vector<ArchInfo> v = [] {
    std::vector<ArchInfo> out;
    for (const Entry& e : entries()) out.push_back(e.info);
    return out;
  }();
  return v;
}
}  // namespace

void register_model(ArchInfo info, ModelFactory make) {
  ST_CHECK(!info.name.empty(), "register_model: the architecture needs a name");
  ST_CHECK(static_cast<bool>(make), "register_model('", info.name, "'): no factory");
  ST_CHECK(info.image_size >= 0, "register_model('", info.name, "'): image size must be >= 0, got ",
           info.image_size);
  for (const Entry& e : entries())
    ST_CHECK(e.info.name != info.name, "register_model('", info.name,
             "'): an architecture of that name exists");
  infos();  // built from the table before it grows
  entries().push_back({info, std::move(make)});
  infos().push_back(std::move(info));
}

const std::vector<ArchInfo>& model_archs() {
  return infos();
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const Entry& e : entries()) names.push_back(e.info.name);
  return names;
}

const ArchInfo& arch_info(const std::string& arch) {
  return find(arch).info;
}

LayerPtr make_model(const std::string& arch, int64_t num_classes, int64_t input_channels, Rng& rng,
                    int64_t image_size) {
  const Entry& e = find(arch);
  ST_CHECK(image_size >= 0, "make_model(", arch, "): image size must be >= 0, got ", image_size);
  return e.make(num_classes, input_channels, image_size > 0 ? image_size : e.info.image_size, rng);
}

}  // namespace st
