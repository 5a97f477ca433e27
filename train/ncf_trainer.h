// NCF training (`sparsetrain train --arch ncf`, models/ncf.h): implicit feedback from
// MovieLens ratings.csv or the synthetic set (data/implicit_feedback.h), four sampled
// negatives per positive drawn anew each epoch, binary cross-entropy, and HR@10 / NDCG@10
// over each user's held-out item and 99 negatives after every epoch
// (train/ranking_eval.h). The step, the exchange, checkpoints and resume are the one
// training loop's (train/training_loop.h).
#pragma once

#include <string>
#include <vector>

#include "train/config.h"
#include "train/flags.h"

namespace st {

class Communicator;

// Where --arch ncf departs from the image defaults, for flags not given: the synthetic
// set, Adam (weight decay 0) at lr 0.001 with batches of 256 as He et al. 2017 (sec. 4.1)
// train, and a constant rate.
void apply_ncf_defaults(TrainConfig& c, const FlagGiven& given);

struct NcfResult {
  bool evaluated = false;
  double test_loss = 0, hr10 = 0, ndcg10 = 0;
  int64_t steps = 0;
  double seconds = 0;
  double mean_step_ms = 0;
  int interrupted_by = 0;  // the stop signal, 0 = none
};

// Runs NCF training on `comm`'s ranks; throws st::Error with a one-line reason.
NcfResult train_ncf(const TrainConfig& config, Communicator& comm);

// Whether `checkpoint` holds an NCF run (its metadata's arch).
bool is_ncf_checkpoint(const std::string& checkpoint);
// HR@10 and NDCG@10 of `checkpoint` on the dataset, seed and synthetic size it was trained
// with (they fix the split and the negatives; --data-dir locates ratings.csv). Collective.
NcfResult evaluate_ncf_checkpoint(const TrainConfig& config, const std::string& checkpoint,
                                  Communicator& comm);

}  // namespace st
