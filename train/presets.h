// Named sets of `sparsetrain train` flags: the language models of the sparsification
// papers, so that `--preset micro_wikitext2` trains MiCRO's WikiText-2 LSTM with its
// learning rate, clipping and schedule. A preset sets only the flags the command line does
// not give (an explicit flag beside it wins), then the language model's defaults fill the
// rest (train/flags.h, apply_lm_defaults).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "models/summary.h"
#include "train/config.h"
#include "train/flags.h"

namespace st {

struct Preset {
  std::string name;         // the --preset value
  std::string description;  // one line for --help and the tasks listing
  // (flag, value) as the command line would give them: {"--layers", "3"}, {"--tied", "1"}.
  std::vector<std::pair<std::string, std::string>> flags;
  // Words in the paper's corpus, the vocabulary `sparsetrain models` builds the model at
  // (the count follows the vocabulary: the embedding and decoder have a row per word).
  int64_t paper_vocab = 0;
};

const std::vector<Preset>& presets();
std::vector<std::string> preset_names();
// Throws st::Error "unknown --preset 'x'; valid: ..." for an unknown name.
const Preset& preset(const std::string& name);

// Sets the flags of c.preset (none when empty) that `given` says the command line did not
// give; returns what counts as given from now on: the command line's flags and the
// preset's (so apply_lm_defaults leaves both alone).
FlagGiven apply_preset(TrainConfig& c, const FlagGiven& given);

// The language model that `--preset NAME` trains, built for a corpus of `vocab` words;
// its trainable parameter count.
int64_t preset_params(const std::string& name, int64_t vocab);
// `sparsetrain models` rows for the presets: each preset's model at its paper_vocab.
std::vector<ArchCount> preset_counts();

}  // namespace st
