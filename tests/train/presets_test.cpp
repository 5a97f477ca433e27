// The --preset table (train/presets.*): a preset sets the flags the command line does not
// give, an explicit flag wins, and the papers' language models have the papers' sizes:
// MiCRO's WikiText-2 LSTM 10,155,600 + 651 V parameters (28,949,319 at V = 28,869, the
// count in kljp/micro's cnn-lstm/run.sh), SIDCo's PTB LSTM Zaremba et al.'s 66M.
#include <gtest/gtest.h>

#include <regex>

#include "core/error.h"
#include "models/lstm_lm.h"
#include "tests/error_text.h"
#include "train/flags.h"
#include "train/lm_trainer.h"
#include "train/presets.h"

namespace st::test {
namespace {

// The config after --preset NAME plus the flags in `given` (already set in c).
TrainConfig with_preset(const std::string& name, TrainConfig c = {},
                        const std::vector<std::string>& given = {}) {
  c.preset = name;
  const FlagGiven on_command_line = [&](const FlagRow& row) {
    for (const std::string& flag : given)
      if (&flag_named(flag) == &row) return true;
    return false;
  };
  const FlagGiven now_given = apply_preset(c, on_command_line);
  apply_lm_defaults(c, now_given);
  return c;
}

int64_t lm_params(const TrainConfig& c, int64_t vocab) {
  Rng rng(0);
  LstmLm model(lm_model_config(c.lm, vocab, 0), rng);
  return count_params(model);
}

TEST(Presets, MicroWikitext2IsMicrosModel) {
  const TrainConfig c = with_preset("micro_wikitext2");
  EXPECT_EQ(c.arch, "lstm");
  EXPECT_EQ(c.dataset, "wikitext2");
  EXPECT_EQ(c.lm.layers, 3);
  EXPECT_EQ(c.lm.hidden, 650);
  EXPECT_EQ(c.lm.emsize, 650);
  EXPECT_TRUE(c.lm.tied);
  EXPECT_FLOAT_EQ(c.lm.dropout, 0.4f);
  EXPECT_EQ(c.lm.bptt, 30);
  EXPECT_EQ(c.batch_size, 32);
  EXPECT_FLOAT_EQ(c.lr, 20.0f);
  EXPECT_FLOAT_EQ(c.clip, 0.4f);
  EXPECT_FLOAT_EQ(c.momentum, 0.0f);
  EXPECT_FLOAT_EQ(c.weight_decay, 0.0f);
  EXPECT_EQ(c.schedule, "multistep:60,80:0.1");
  EXPECT_DOUBLE_EQ(c.warmup_epochs, 5.0);
  EXPECT_EQ(c.epochs, 90);
  // 3 layers of 4 x 650 x (650 + 650) weights and 2 x 4 x 650 biases, plus the tied
  // embedding (650 V) and the decoder's bias (V).
  EXPECT_EQ(lm_params(c, 28869), 28949319);
  EXPECT_EQ(lm_params(c, 28869), 10155600 + 651 * 28869);
  EXPECT_EQ(preset_params("micro_wikitext2", 28869), 28949319);
}

TEST(Presets, SidcoPtbIsZarembasLargeLstm) {
  const TrainConfig c = with_preset("sidco_ptb");
  EXPECT_EQ(c.dataset, "ptb");
  EXPECT_EQ(c.lm.layers, 2);
  EXPECT_EQ(c.lm.hidden, 1500);
  EXPECT_FALSE(c.lm.tied);
  EXPECT_FLOAT_EQ(c.lm.dropout, 0.65f);
  EXPECT_EQ(c.lm.bptt, 35);
  EXPECT_FLOAT_EQ(c.lr, 22.0f);
  EXPECT_FLOAT_EQ(c.clip, 0.25f);
  EXPECT_EQ(c.schedule, "constant");
  // Embedding and decoder 1500 x 10000 each, decoder bias 10000, two layers of
  // 4 x 1500 x 3000 weights and 2 x 4 x 1500 biases: Zaremba et al.'s 66M.
  EXPECT_EQ(lm_params(c, 10000), 66034000);
  EXPECT_EQ(preset_params("sidco_ptb", 10000), 66034000);
}

// `sparsetrain models` lists each preset's model at the paper's vocabulary.
TEST(Presets, ListedAtThePapersVocabulary) {
  const std::vector<ArchCount> rows = preset_counts();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].info.name, "lstm");
  EXPECT_EQ(rows[0].preset, "micro_wikitext2");
  EXPECT_EQ(rows[0].vocab, 28869);
  EXPECT_EQ(rows[0].params, 28949319);
  EXPECT_EQ(rows[1].preset, "sidco_ptb");
  EXPECT_EQ(rows[1].vocab, 10000);
  EXPECT_EQ(rows[1].params, 66034000);
  const std::string json = models_json(rows);
  EXPECT_NE(json.find("{\"name\":\"lstm\",\"params\":28949319,\"image_size\":0,\"preset\":"
                      "\"micro_wikitext2\",\"vocab\":28869,"),
            std::string::npos)
      << json;
  EXPECT_TRUE(
      std::regex_search(models_listing(rows),
                        std::regex("\nlstm +66,034,000 +10,000 words +--preset sidco_ptb: SIDCo")))
      << models_listing(rows);
}

TEST(Presets, AFlagGivenBesideThePresetWins) {
  TrainConfig c;
  c.lr = 5.0f;
  c.lm.hidden = 100;
  c.lm.emsize = 100;
  const TrainConfig got = with_preset("micro_wikitext2", c, {"--lr", "--hidden", "--emsize"});
  EXPECT_FLOAT_EQ(got.lr, 5.0f);
  EXPECT_EQ(got.lm.hidden, 100);
  EXPECT_EQ(got.lm.layers, 3);  // not given: the preset's
  // The language model's defaults leave the preset's values alone (its clip is not 0.25).
  EXPECT_FLOAT_EQ(got.clip, 0.4f);
}

TEST(Presets, NoPresetChangesNothing) {
  const TrainConfig c = with_preset("");
  EXPECT_EQ(c.arch, TrainConfig{}.arch);
  EXPECT_EQ(c.lm.layers, TrainConfig{}.lm.layers);
}

TEST(Presets, UnknownNameIsOneLineWithTheValidOnes) {
  const std::string e = error_of([] { with_preset("micro_ptb"); });
  EXPECT_NE(e.find("unknown --preset 'micro_ptb'; valid: micro_wikitext2, sidco_ptb"),
            std::string::npos)
      << e;
}

TEST(Presets, EveryFlagOfEveryPresetIsAFlagOfTheTable) {
  for (const Preset& p : presets())
    for (const auto& [flag, value] : p.flags) {
      TrainConfig c;
      EXPECT_NO_THROW(set_flag_text(c, flag_named(flag), value)) << p.name << " " << flag;
    }
  EXPECT_THROW(flag_named("--no-such-flag"), Error);
}

}  // namespace
}  // namespace st::test
