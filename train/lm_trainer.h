// Language modelling, the task behind `sparsetrain train --arch lstm` (train/lm_trainer.cpp):
// truncated BPTT over a word-level corpus (Zaremba et al. 2014, sec. 4.1; PyTorch's
// word_language_model example). The step, the exchange, checkpoints, metrics and the trace
// are the one training loop's (train/training_loop.h); this task supplies the windows,
// the carried LSTM state and its checkpointing, the loss and perplexity.
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
#include <string>

#include "models/lstm_lm.h"
#include "train/config.h"

namespace st {

class Communicator;

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

// Trains on config.dataset: "fortunes" (the Debian package, or --data-dir with fortune
// files) or a folder of PTB / WikiText / train.txt-style splits (--data-dir, with
// --dataset ptb, wikitext2 or text). For fortunes, rank 0 writes the split it trains on
// to <out>/corpus/{train,valid,test}.txt (PTB format) for other tools to read.
// The LR schedule "plateau" divides the rate by 4 whenever the validation loss fails to
// improve (the PyTorch example's rule); the other --schedule values work as for the CNNs.
// The model's settings are config.lm; the second form trains with `lm` instead.
// The flags the image models share take the PyTorch word_language_model example's
// defaults on the command line (the lm_default column of train/flags.cpp).
LmResult train_lm(const TrainConfig& config, Communicator& comm);
LmResult train_lm(const TrainConfig& config, const LmOptions& lm, Communicator& comm);

// Perplexity of a language-model checkpoint on the test split (the model's sizes come
// from the checkpoint's metadata; the corpus from config.dataset / data_dir).
LmResult evaluate_lm_checkpoint(const TrainConfig& config, const std::string& checkpoint,
                                Communicator& comm);

// The LSTM of `lm` for a corpus of `vocab` words, its dropout masks drawn from `seed`.
LstmLmConfig lm_model_config(const LmOptions& lm, int64_t vocab, uint64_t seed);

// True when `checkpoint` was written by train_lm.
bool is_lm_checkpoint(const std::string& checkpoint);

}  // namespace st
