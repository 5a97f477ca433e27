// Pieces the training loop (train/training_loop.cpp) and its tasks (train/trainer.cpp,
// train/lm_trainer.cpp) share: the progress line's duration format, peak memory, the
// sparsification columns of the metrics, the exchange hook a config asks for, and the
// rank-0 broadcast.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "layers/flat_params.h"
#include "sparsify/sparsify_hook.h"
#include "train/config.h"
#include "train/metrics.h"
#include "train/trace.h"  // the loops' trace helpers (trace_reducer_timeline, ...)

namespace st {

// "1m05s", "2h03m".
std::string format_duration(double seconds);
// Peak resident memory of this process in MB.
double peak_rss_mb();
// Sums one iteration's per-bucket statistics into the iteration's metrics row:
// user density, actual density (aggregated values / elements), counts, threshold of the
// largest bucket, mean padding overhead, selection and exchange time, bytes sent.
void add_sparsify_metrics(const std::vector<SparsifyStats>& stats, MetricRow& row);
// The --sp pairs as one "key=value key=value" string (run metadata, config.json).
std::string format_sparsifier_params(const std::map<std::string, std::string>& params);
// The run's bucket exchange: a SparsifyHook around --sparsifier (also returned in
// `sparsify`), or the dense allreduce for --sparsifier none (`sparsify` null).
std::shared_ptr<BucketHook> make_exchange_hook(const TrainConfig& c,
                                               std::shared_ptr<SparsifyHook>& sparsify);
// Rank 0's parameters and buffers become everyone's (docs/DESIGN.md explains why).
void broadcast_model(Layer& model, FlatParams& flat, Communicator& comm);
// Rank 0's buffers (BatchNorm running statistics) become everyone's, so a sharded
// evaluation and the saved model agree (PyTorch DDP's default broadcast_buffers).
void broadcast_buffers(Layer& model, Communicator& comm);

}  // namespace st
