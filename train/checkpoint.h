// Training checkpoints: one safetensors file holding the model's state under
// torchvision-compatible names (parameters and BatchNorm buffers), the optimiser's
// momentum buffers under "optimizer.<param>.momentum_buffer", and the trainer's
// position and configuration as string metadata. Written atomically, so a kill during
// the write leaves the previous checkpoint loadable.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.h"
#include "optim/optimizer.h"

namespace st {

struct TrainPosition {
  int64_t epoch = 0;  // epoch to continue in
  int64_t batch = 0;  // first batch of that epoch still to run
  int64_t step = 0;   // optimiser steps taken so far
};

// Everything a checkpoint of `model` holds besides metadata, under the names it is saved
// with: parameters, buffers, the optimiser's state, then `extra`.
std::vector<std::pair<std::string, Tensor>> checkpoint_tensors(
    Layer& model, const Optimizer* optimizer,
    const std::vector<std::pair<std::string, Tensor>>& extra = {});
// The name of the first float32 tensor holding a NaN or an infinity ("" when none does).
std::string first_non_finite(const std::vector<std::pair<std::string, Tensor>>& tensors);

// A checkpoint is written only when every float32 tensor is finite; otherwise the previous
// file stays and the error names the tensor.
// `extra` tensors are stored under their own names (a trainer's state beyond model and
// optimiser, e.g. the language model's carried LSTM state); read them back with
// load_safetensors(path).
void save_checkpoint(const std::string& path, Layer& model, const Optimizer* optimizer,
                     const TrainPosition& pos, const std::map<std::string, std::string>& meta,
                     const std::vector<std::pair<std::string, Tensor>>& extra = {});

// A run folder given where its checkpoint is meant: "<dir> is a directory (did you mean
// <dir>/checkpoint.safetensors?)".
void check_checkpoint_file(const std::string& path);

// The file beside a run's checkpoint that keeps its last epoch-end state
// ("<dir>/epoch_end.safetensors"): mid-epoch checkpoints replace checkpoint.safetensors,
// and only an epoch-end one resumes on another number of ranks or batch size.
std::string epoch_end_path(const std::string& checkpoint_path);
// Copies `from` to `to` through a temporary file and a rename, so `to` is always a whole
// checkpoint (the previous one until the copy is complete).
void copy_checkpoint(const std::string& from, const std::string& to);

// Restores model (and optimiser when given) in place; returns the position. Errors name
// the file and the tensor that is missing or has the wrong shape.
// `check`, when given, sees the metadata and position after the file is read and before
// anything is restored (a resume's compatibility checks, which then speak before a loader
// would).
using MetadataCheck =
    std::function<void(const std::map<std::string, std::string>&, const TrainPosition&)>;
// Reading is strict, as PyTorch's load_state_dict(strict=True): every parameter and buffer
// present with its shape and type, a tensor that is neither model nor trainer state
// refused (unless allow_unknown_tensors), the optimiser state complete, and the recorded
// settings (format, world_size, batch_size, precision, ...) of known values and ranges.
// Loading weights only (no optimiser, metadata or check: an evaluation) accepts a file
// without a position, such as PyTorch's safetensors save_file writes; the position is 0.
TrainPosition load_checkpoint(const std::string& path, Layer& model, Optimizer* optimizer,
                              std::map<std::string, std::string>* meta = nullptr,
                              const MetadataCheck& check = {}, bool allow_unknown_tensors = false);

// Typed access to checkpoint metadata (string values from a file that may be damaged or
// hand-edited). Errors name the file and the key: "<path>: checkpoint metadata 'epoch' is
// 'abc', expected an integer" or "<path>: checkpoint metadata lacks 'epoch'".
const std::string& meta_string(const std::map<std::string, std::string>& meta,
                               const std::string& key, const std::string& path);
// The whole value must be a decimal integer within [lo, hi].
int64_t meta_int(const std::map<std::string, std::string>& meta, const std::string& key,
                 const std::string& path, int64_t lo = std::numeric_limits<int64_t>::min(),
                 int64_t hi = std::numeric_limits<int64_t>::max());
// The whole value must be a number (decimal or exponent notation; "inf" and "nan" too).
double meta_double(const std::map<std::string, std::string>& meta, const std::string& key,
                   const std::string& path);

}  // namespace st
