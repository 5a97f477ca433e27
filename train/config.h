// The settings of a training run: one field per `sparsetrain train` flag, whose
// initialiser is the flag's default. The flags themselves (names, help, ranges, which ranks must
// agree on, what a checkpoint records) are declared once, in the table of train/flags.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace st {

// The language model's own settings (--arch lstm; TrainConfig::lm); the rest (lr,
// momentum, clip, epochs, -b, out, resume, sparsifier, ...) are TrainConfig's.
struct LmOptions {
  int layers = 2;
  int64_t hidden = 200;
  int64_t emsize = 200;
  int64_t bptt = 35;
  float dropout = 0.2f;
  bool tied = false;
  int64_t eval_batch_size = 10;  // streams per rank for validation and test
  int64_t max_vocab = 10000;     // fortunes corpus only (PTB/WikiText bring their own)
};

struct TrainConfig {
  // model and data
  std::string arch = "resnet20";
  std::string preset;  // a named set of the other flags (train/presets.h), "" = none
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  int64_t synthetic_size = 0;  // examples per synthetic epoch (0 = 50000)
  int image_size = 0;          // 0 = the architecture's natural size
  int64_t train_subset = 0;    // use only the first N training examples (0 = all)
  int64_t test_subset = 0;     // use only the first N test examples (0 = all)
  // optimisation
  int64_t epochs = 10;
  int64_t batch_size = 128;
  int64_t accum_steps = 1;        // micro-batches per optimiser step (gradient accumulation)
  std::string optimizer = "sgd";  // sgd | adam | adamw (PyTorch's semantics)
  float lr = 0.1f;
  float momentum = 0.9f;
  float weight_decay = 1e-4f;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  bool no_wd_on_bn = false;
  std::string schedule = "multistep";
  double warmup_epochs = 0.0;
  float clip = 0.0f;  // gradient-norm clip, 0 = off
  // Mixed precision (docs/PRECISION.md): Conv2d/Linear arithmetic fp32 | bf16 | fp16
  // (fp16 with dynamic loss scaling), and the dense exchange's wire format.
  std::string precision = "fp32";
  std::string comm_dtype = "fp32";
  bool augment = true;
  // run control
  uint64_t seed = 0;
  int threads = 2;
  int workers = 2;
  int64_t max_iters = 0;  // stop (with a checkpoint) after this many steps in total; 0 = all
  std::string device = "cpu";
  std::string out = "runs/default";
  std::string resume;                  // checkpoint path to continue from
  bool allow_unknown_tensors = false;  // load checkpoints holding tensors of no known use
  bool check_flags = false;            // the CLI only checks the flags (check_config) and exits
  bool overwrite = false;              // replace the run already in `out` (else that is an error)
  std::string metrics_format = "csv";
  int64_t log_every = 20;            // iterations between progress lines
  int64_t checkpoint_every = 0;      // iterations between mid-epoch checkpoints (0 = epoch ends)
  double checkpoint_minutes = 10.0;  // also checkpoint after this much wall time (0 = off)
  int64_t eval_batches = 0;          // cap on test batches per evaluation (0 = all)
  bool quiet = false;
  // distributed
  std::string comm = "auto";    // auto | mpi | nccl | local
  double bucket_cap_mb = 25.0;  // a huge value gives one whole-model bucket
  double first_bucket_mb = 1.0;
  bool overlap = true;  // false: exchange everything after backward (baseline)
  // Each bucket's update applied as it arrives, and the next forward overlapping the
  // buckets still in flight (false, the default: the step waits for every bucket, then
  // updates; on a quiet machine it was the faster at batch 64 and 128, docs/RESULTS.md).
  bool forward_overlap = false;
  // With forward overlap: the share of the gradient whose buckets (the first layers')
  // are exchanged after backward, first layer first (comm/reducer.h, exchange_order);
  // negative: chosen from the first steps' times (train/exchange_order_probe.h).
  double first_layers_first = -1;
  bool sync_bn = false;  // BatchNorm batch statistics over all ranks (else per rank)
  // Two-level exchange (comm/hierarchical_hook.h): "off", "node" (nodes by host name) or a
  // number of consecutive ranks that form a node.
  std::string hierarchy = "off";
  std::string plan = "off";      // "auto": dense or compressed per bucket (train/exchange_plan.h)
  bool print_buckets = false;    // print the gradient bucket plan at start
  bool print_placement = false;  // every rank prints its host and node-local rank at start
  bool summary = false;          // rank 0 prints the model's table of layers at start
  std::string trace;             // Chrome-trace JSON path ("" = off)
  // sparsification (the bucket hook; "none" = plain dense allreduce hook)
  std::string sparsifier = "none";
  double density = 0.01;
  int64_t dense_warmup_iters = 0;
  std::map<std::string, std::string> sparsifier_params;  // --sp key=value
  int64_t trace_iters = 5;  // iterations recorded, after 5 warm-up iterations
  // the language model (--arch lstm)
  LmOptions lm;
};

}  // namespace st
