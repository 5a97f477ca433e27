// A TrainingTask over a fixed set of small images in memory, for tests that run the
// training loop several ways (ranks, accumulation, precision, overlap) and compare the
// steps: `examples` images [3, 6, 6] of normal noise from `data_seed`, label i given by
// `label(i)`, softmax cross-entropy on the network the test builds. A subclass says which
// examples a step reads (load_block) and its schedule; the rest is here.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/sequential.h"
#include "layers/softmax_cross_entropy.h"
#include "train/training_loop.h"

namespace st::test {

class FixedImageTask : public TrainingTask {
 public:
  static constexpr int64_t kImageFloats = 3 * 6 * 6;

  FixedImageTask(std::unique_ptr<Sequential> net, int64_t examples, uint64_t data_seed,
                 const std::function<int32_t(int64_t)>& label)
      : net_(std::move(net)) {
    Rng data(data_seed);
    x_ = Tensor::empty({examples, 3, 6, 6});
    for (int64_t i = 0; i < x_.numel(); ++i) x_.f32()[i] = data.normal();
    std::vector<int32_t> labels;
    for (int64_t i = 0; i < examples; ++i) labels.push_back(label(i));
    y_ = Tensor::from_vector_i32(labels, {examples});
  }
  Layer& model() override { return *net_; }
  Device device() const override { return Device::cpu(); }
  QualityMetric quality() const override { return QualityMetric::Accuracy; }
  const char* item_name() const override { return "images"; }
  const char* step_name() const override { return "batch"; }
  bool clips_before_exchange() const override { return false; }
  StepLoss forward_loss() override {
    const float loss = ce_.forward(net_->forward(images_), labels_);
    return {loss, static_cast<double>(labels_.numel()), ce_.correct()};
  }
  Tensor loss_grad() override { return ce_.backward(); }
  Evaluation evaluate(bool) override { return {{}, "", 0.0}; }
  std::map<std::string, std::string> metadata() const override { return {{"arch", "test"}}; }

 protected:
  // Examples [first, first + n) as the step's input.
  void load_block(int64_t first, int64_t n) {
    images_ = x_.slice_flat(first * kImageFloats, Shape{n, 3, 6, 6}).clone();
    labels_ = y_.slice_flat(first, Shape{n}).clone();
  }
  Sequential& net() { return *net_; }

 private:
  std::unique_ptr<Sequential> net_;
  Tensor x_, y_, images_, labels_;
  SoftmaxCrossEntropy ce_;
};

// conv 3x3 (3 -> 6 channels), [BatchNorm], ReLU, a linear layer to 4 classes; weights from
// Rng(5): the network of the accumulation and precision tests.
inline std::unique_ptr<Sequential> conv_relu_fc_net(bool batchnorm) {
  Rng rng(5);
  auto net = std::make_unique<Sequential>();
  net->add("conv1", std::make_unique<Conv2d>(3, 6, 3, 1, 1, true, rng));
  if (batchnorm) net->add("bn1", std::make_unique<BatchNorm2d>(6));
  net->add("relu1", std::make_unique<ReLU>());
  net->add("flat", std::make_unique<Flatten>());
  net->add("fc", std::make_unique<Linear>(6 * 6 * 6, 4, true, rng));
  return net;
}

}  // namespace st::test
