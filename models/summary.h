// What `sparsetrain models` prints: every architecture of the registry with its exact
// trainable parameter count (what torchinfo and Keras' summary() report), and one
// model's table of layers. Counts come from building the model (make_model) and summing
// the elements of its parameters, so they are the numbers training updates, never a
// formula that could drift from the builders.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "models/registry.h"

namespace st {

// One registry row built for `classes` outputs on `channels`-channel images at the row's
// natural input size.
struct ArchCount {
  ArchInfo info;
  int64_t classes = 0;
  int64_t channels = 0;
  int64_t params = 0;  // trainable elements: weights, biases, BatchNorm scale and shift
  // A language model's row (train/presets.h, preset_counts): the --preset that builds it
  // and the vocabulary it was counted at; classes and channels are 0 then.
  std::string preset;
  int64_t vocab = 0;
};

// Builds `arch` (one model at a time, freed before the next) and counts its parameters.
// Throws st::Error for an unknown name or a non-positive classes or channels.
ArchCount count_arch(const std::string& arch, int64_t classes, int64_t channels);
// Every row of model_archs(), in its order. The language model (--arch lstm) is not a
// registry row: its size follows the corpus's vocabulary, which only a dataset gives, so
// its rows come from the presets at their paper's vocabulary (train/presets.h).
std::vector<ArchCount> count_archs(int64_t classes, int64_t channels);

// `sparsetrain models`: an aligned table (counts with thousands separators). A language
// model's row shows its vocabulary in place of an input size and starts its description
// with its --preset.
std::string models_listing(const std::vector<ArchCount>& rows);
// `sparsetrain models --json`: one JSON object per row and line (name, params,
// image_size, classes, channels, description; a language model's row has preset and
// vocab in place of classes and channels).
std::string models_json(const std::vector<ArchCount>& rows);

// A layer that owns parameters, as the table of layers shows it.
struct LayerRow {
  std::string path;  // dotted path, the parameters' names without their last part
  std::string type;  // describe(), e.g. "Conv2d(64->64, k3, s1)"
  int64_t params = 0;
  Shape output = {};  // its output for the input given to layer_rows (empty: none given)
  int64_t macs = 0;   // multiply-adds of that forward, counted as multiply_adds() does
};

// Multiply-adds of one layer's forward with output shape `y`, as torchinfo counts them
// (its LayerInfo.calculate_macs): a convolution (a type whose name holds "Conv", as
// torchinfo tests the class name) costs each weight and bias element once per output
// position, (weight + bias elements) x N x H_out x W_out, which
// for a weight [C_out, C_in/groups, kh, kw] is C_out (C_in/groups) kh kw H_out W_out
// per image; any other layer costs its parameter elements once per example, N x
// elements (Linear: in x out + out; BatchNorm: its scale and shift, 2C). Layers without
// parameters (activations, pooling, the residual add) count 0, as in torchinfo.
int64_t multiply_adds(Layer& layer, const Shape& y);

// The leaves of `model` (layers that are not containers) that own parameters, depth
// first (forward order for the built-in models). Without `input` it reads the structure
// only (nothing is allocated, no forward runs). With `input` (e.g. [1, 3, 32, 32]) and
// the model on the CPU, one forward of zeros in evaluation mode (no BatchNorm statistic
// or dropout mask changes; the training flag is restored) gives each row's output shape
// and multiply-adds.
std::vector<LayerRow> layer_rows(Layer& model, const Shape& input = {});
// The table of layers: path, type, (with `input`: output shape), parameters, (with
// `input`: multiply-adds) per row, then the total and the kinds of parameter-free layers
// left out (activations, pooling, reshaping: containers do not say their children's
// names, so those layers have no path to print). `title` is its first line. This is what
// a training run prints before its first step (`train --summary`). A model off the CPU
// gets the table without shapes, with a line saying why.
std::string layer_table(Layer& model, const std::string& title, const Shape& input = {});
// `sparsetrain models --summary ARCH`: the table of `arch` built as count_arch does, with
// the output shapes and multiply-adds of one example at the row's natural input size.
std::string arch_summary(const std::string& arch, int64_t classes, int64_t channels);

// 11173962 -> "11,173,962".
std::string with_thousands(int64_t n);

}  // namespace st
