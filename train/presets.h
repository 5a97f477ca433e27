// Named sets of `sparsetrain train` flags: the language models of the sparsification
// papers, so that `--preset micro_wikitext2` trains MiCRO's WikiText-2 LSTM with its
// learning rate, clipping and schedule. A preset sets only the flags the command line does
// not give (an explicit flag beside it wins), then the language model's defaults fill the
// rest (train/flags.h, apply_lm_defaults).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "train/config.h"
#include "train/flags.h"

namespace st {

struct Preset {
  std::string name;         // the --preset value
  std::string description;  // one line for --help and the tasks listing
  // (flag, value) as the command line would give them: {"--layers", "3"}, {"--tied", "1"}.
  std::vector<std::pair<std::string, std::string>> flags;
};

const std::vector<Preset>& presets();
std::vector<std::string> preset_names();
// Throws st::Error "unknown --preset 'x'; valid: ..." for an unknown name.
const Preset& preset(const std::string& name);

// Sets the flags of c.preset (none when empty) that `given` says the command line did not
// give; returns what counts as given from now on: the command line's flags and the
// preset's (so apply_lm_defaults leaves both alone).
FlagGiven apply_preset(TrainConfig& c, const FlagGiven& given);

}  // namespace st
