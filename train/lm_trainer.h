// The language-model training loop behind `sparsetrain train --arch lstm`: truncated BPTT
// over a word-level corpus (Zaremba et al. 2014, sec. 4.1; PyTorch's word_language_model
// example), with the CNN trainer's machinery: the bucketed Reducer with the dense or
// sparsifying hook, checkpoints with exact resume, iterations/epochs metrics, the
// progress line and the Chrome trace.
//
// Per window: forward from the carried (detached) LSTM state, softmax cross-entropy over
// the next tokens, backward, gradient-norm clipping of the LOCAL gradient before the
// exchange (as DGC, Lin et al. 2018 sec. 3.2, and the sparsification papers do for LSTMs;
// the buckets then launch after backward, since the norm needs the whole gradient), the
// exchange, then SGD. Each rank trains on a contiguous shard of the batch streams.
// Perplexity exp(mean loss per token) on the validation split after every epoch and on
// the test split at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "train/trainer.h"

namespace st {

class Communicator;

// The language model's own settings; the rest (lr, momentum, clip, epochs, -b, out,
// resume, sparsifier, ...) come from TrainConfig.
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

struct LmResult {
  // A split is evaluated at epoch ends (valid also at --max-iters); a run stopped before
  // one leaves its `evaluated` false and its numbers 0.
  double valid_loss = 0, valid_ppl = 0;
  double test_loss = 0, test_ppl = 0;
  bool valid_evaluated = false, test_evaluated = false;
  int64_t steps = 0;
  double seconds = 0;
  double mean_step_ms = 0;  // training step time (forward + backward + exchange + update)
  int interrupted_by = 0;   // the stop signal (SIGINT, SIGTERM, SIGUSR1, SIGHUP), 0 = none
};

// The PyTorch word_language_model example's defaults for the flags the image models
// share, applied to every one the user did not give (`given(flag)` false): --lr 20
// --momentum 0 --wd 0 --clip 0.25 -b 20 --schedule plateau --dataset fortunes.
void apply_lm_defaults(TrainConfig& config, const std::function<bool(const char*)>& given);

// Trains on config.dataset: "fortunes" (the Debian package, or --data-dir with fortune
// files) or a folder of PTB / WikiText / train.txt-style splits (--data-dir, with
// --dataset ptb, wikitext2 or text). For fortunes, rank 0 writes the split it trains on
// to <out>/corpus/{train,valid,test}.txt (PTB format) for other tools to read.
// The LR schedule "plateau" divides the rate by 4 whenever the validation loss fails to
// improve (the PyTorch example's rule); the other --schedule values work as for the CNNs.
LmResult train_lm(const TrainConfig& config, const LmOptions& lm, Communicator& comm);

// Perplexity of a language-model checkpoint on the test split (the model's sizes come
// from the checkpoint's metadata; the corpus from config.dataset / data_dir).
LmResult evaluate_lm_checkpoint(const TrainConfig& config, const std::string& checkpoint,
                                Communicator& comm);

// True when `checkpoint` was written by train_lm.
bool is_lm_checkpoint(const std::string& checkpoint);

}  // namespace st
