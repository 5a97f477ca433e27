#include "train/presets.h"

#include <algorithm>
#include <memory>
#include <set>

#include "core/error.h"
#include "core/word_list.h"
#include "train/lm_trainer.h"

namespace st {

namespace {

std::vector<Preset> make_presets() {
  return {
      // MiCRO (Yoon and Oh, 2023), the WikiText-2 task of its repository (kljp/micro,
      // cnn-lstm/run.py task 'wikitext2' and tasks/language_modeling: define_model and
      // the train loader). The model: 3 layers x 650 hidden, tied weights, dropout 0.4,
      // BPTT 30: 10,155,600 + 651 V parameters for V words. Training: batch 32 per
      // worker, 90 epochs, plain SGD (momentum 0, no weight decay), each worker's
      // gradient clipped to norm 0.4 before the exchange (batch_loss_and_gradient's
      // rnn_clip), learning rate 2.5 x (32 / 64) x 16 workers = 20 after a 5-epoch linear
      // warm-up, divided by 10 at epochs 60 and 80 (optimizer_decay_at_epochs).
      {"micro_wikitext2",
       "MiCRO's WikiText-2 LSTM: 3 x 650, tied, dropout 0.4, BPTT 30, lr 20 (16 ranks), clip 0.4",
       {{"--arch", "lstm"},
        {"--dataset", "wikitext2"},
        {"--layers", "3"},
        {"--hidden", "650"},
        {"--emsize", "650"},
        {"--tied", "1"},
        {"--dropout", "0.4"},
        {"--bptt", "30"},
        {"--batch-size", "32"},
        {"--lr", "20"},
        {"--momentum", "0"},
        {"--wd", "0"},
        {"--clip", "0.4"},
        {"--warmup-epochs", "5"},
        {"--schedule", "multistep:60,80:0.1"},
        {"--epochs", "90"}},
       // WikiText-2's vocabulary with the end-of-line token, as the run script's
       // parameter count implies (28,949,319 = 10,155,600 + 651 x 28,869).
       28869},
      // SIDCo (Abdelmoniem et al., MLSys 2021), the PTB task of its repository
      // (ahmedcs/SIDCo): models/lstm.py is Zaremba et al.'s large PTB LSTM, 2 layers x
      // 1500 with 1500-wide embeddings, untied, keep probability 0.35 (dropout 0.65),
      // 35 steps; exp_configs/lstm.conf gives lr 22, batch 20 per worker, 30 epochs;
      // dl_trainer.py uses momentum 0 and no weight decay for PTB and dist_trainer.py
      // clips the gradient norm to 0.25. Its PTB decay starts at epoch 63
      // (_adjust_learning_rate_lstmptb), after the 30 epochs: the rate stays constant.
      {"sidco_ptb",
       "SIDCo's PTB LSTM (Zaremba et al.'s large): 2 x 1500, dropout 0.65, BPTT 35, lr 22, "
       "clip 0.25",
       {{"--arch", "lstm"},
        {"--dataset", "ptb"},
        {"--layers", "2"},
        {"--hidden", "1500"},
        {"--emsize", "1500"},
        {"--dropout", "0.65"},
        {"--bptt", "35"},
        {"--batch-size", "20"},
        {"--lr", "22"},
        {"--momentum", "0"},
        {"--wd", "0"},
        {"--clip", "0.25"},
        {"--schedule", "constant"},
        {"--epochs", "30"}},
       10000},  // Mikolov's PTB vocabulary
  };
}

}  // namespace

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = make_presets();
  return table;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets()) names.push_back(p.name);
  return names;
}

const Preset& preset(const std::string& name) {
  for (const Preset& p : presets())
    if (p.name == name) return p;
  ST_THROW("unknown --preset '", name, "'; valid: ", word_list(preset_names()));
}

FlagGiven apply_preset(TrainConfig& c, const FlagGiven& given) {
  if (c.preset.empty()) return given;
  auto set = std::make_shared<std::set<const FlagRow*>>();
  for (const auto& [flag, value] : preset(c.preset).flags) {
    const FlagRow& row = flag_named(flag);
    set->insert(&row);
    if (!given(row)) set_flag_text(c, row, value);
  }
  return [given, set](const FlagRow& row) { return given(row) || set->count(&row) > 0; };
}

int64_t preset_params(const std::string& name, int64_t vocab) {
  ST_CHECK(vocab > 0, "preset_params(", name, "): vocab must be positive, got ", vocab);
  TrainConfig c;
  c.preset = name;
  apply_lm_defaults(c, apply_preset(c, [](const FlagRow&) { return false; }));
  Rng rng(0);  // the values do not matter, only how many there are
  LstmLm model(lm_model_config(c.lm, vocab, 0), rng);
  return count_params(model);
}

std::vector<ArchCount> preset_counts() {
  std::vector<ArchCount> rows;
  for (const Preset& p : presets()) {
    ArchCount row;
    row.info = {"lstm", p.description, 0};
    row.preset = p.name;
    row.vocab = p.paper_vocab;
    row.params = preset_params(p.name, p.paper_vocab);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace st
