// The flag table (train/flags.*): labels, range messages, the run metadata it writes
// (the same keys and text as checkpoints and config.json always had), the rank-agreement
// list (the LSTM flags included), the language model's defaults and the resume checks.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "tests/error_text.h"
#include "train/config_check.h"
#include "train/flags.h"

namespace st::test {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

TEST(Flags, NamesAndLabelsAreUnique) {
  std::set<std::string> labels;
  for (const FlagRow& row : train_flags()) {
    EXPECT_TRUE(labels.insert(flag_label(row)).second) << row.names;
    EXPECT_FALSE(row.help.empty()) << row.names;
    EXPECT_EQ(&flag_of(row.field), &row) << row.names;
  }
  EXPECT_EQ(flag_label(flag_of(&TrainConfig::batch_size)), "-b/--batch-size");
  EXPECT_EQ(flag_label(flag_of(&TrainConfig::weight_decay)), "--wd");
  EXPECT_EQ(flag_label(flag_of(&TrainConfig::arch)), "--arch");
  EXPECT_EQ(flag_label(flag_of(&LmOptions::hidden)), "--hidden");
}

TEST(Flags, RangeMessagesNameTheFlag) {
  const auto message = [](const std::function<void(TrainConfig&)>& set) {
    TrainConfig c;
    set(c);
    return error_of([&] { check_flag_ranges(c); });
  };
  EXPECT_TRUE(error_of([] { check_flag_ranges(TrainConfig{}); }).empty());
  EXPECT_TRUE(starts_with(message([](TrainConfig& c) { c.epochs = 0; }),
                          "--epochs must be at least 1, got 0"));
  EXPECT_TRUE(starts_with(message([](TrainConfig& c) { c.batch_size = 0; }),
                          "-b/--batch-size must be at least 1, got 0"));
  EXPECT_TRUE(starts_with(message([](TrainConfig& c) { c.lr = -1; }),
                          "--lr must be greater than 0 and finite, got -1"));
  EXPECT_TRUE(starts_with(message([](TrainConfig& c) { c.weight_decay = -1; }),
                          "--wd must be at least 0 and finite, got -1"));
  EXPECT_TRUE(starts_with(message([](TrainConfig& c) { c.momentum = 1; }),
                          "--momentum must be below 1, got 1"));
  EXPECT_TRUE(starts_with(message([](TrainConfig& c) { c.density = 2; }),
                          "--density must be in (0, 1], got 2"));
  EXPECT_TRUE(starts_with(message([](TrainConfig& c) { c.beta2 = 1; }),
                          "--betas must be in [0, 1), got 0.9 1"));
  EXPECT_TRUE(starts_with(message([](TrainConfig& c) { c.optimizer = "lion"; }),
                          "unknown --optimizer 'lion'; valid: sgd, adam, adamw"));
}

// The keys and text the image task and the training loop wrote before the table, and the
// exchange's --hierarchy and --plan.
TEST(Flags, ImageMetadataKeepsItsKeysAndText) {
  const std::map<std::string, std::string> expected = {{"arch", "resnet20"},
                                                       {"sparsifier", "none"},
                                                       {"density", "0.010000"},
                                                       {"sp", ""},
                                                       {"dataset", "fashion-mnist"},
                                                       {"seed", "0"},
                                                       {"synthetic_size", "0"},
                                                       {"train_subset", "0"},
                                                       {"lr", "0.100000"},
                                                       {"batch_size", "128"},
                                                       {"epochs", "10"},
                                                       {"accum_steps", "1"},
                                                       {"optimizer", "sgd"},
                                                       {"precision", "fp32"},
                                                       {"comm_dtype", "fp32"},
                                                       {"bucket_cap_mb", "25"},
                                                       {"first_bucket_mb", "1"},
                                                       {"hierarchy", "off"},
                                                       {"plan", "off"}};
  EXPECT_EQ(flag_metadata(TrainConfig{}, SavedBy::image), expected);
}

TEST(Flags, LanguageModelMetadataKeepsItsKeysAndText) {
  TrainConfig c;
  c.sparsifier_params = {{"hi", "1.2"}, {"lo", "0.8"}};
  c.lm.tied = true;
  const std::map<std::string, std::string> meta = flag_metadata(c, SavedBy::lm);
  EXPECT_EQ(meta.count("synthetic_size"), 0u);
  EXPECT_EQ(meta.count("arch"), 0u);  // the task records its own name
  EXPECT_EQ(meta.at("data_dir"), "");
  EXPECT_EQ(meta.at("clip"), "0.000000");
  EXPECT_EQ(meta.at("sp"), "hi=1.2 lo=0.8");
  EXPECT_EQ(meta.at("lm_layers"), "2");
  EXPECT_EQ(meta.at("lm_hidden"), "200");
  EXPECT_EQ(meta.at("lm_emsize"), "200");
  EXPECT_EQ(meta.at("lm_bptt"), "35");
  EXPECT_EQ(meta.at("lm_dropout"), "0.200000");
  EXPECT_EQ(meta.at("lm_tied"), "1");
}

TEST(Flags, RanksAgreeOnTheLstmFlags) {
  TrainConfig c;
  const auto value_of = [](const TrainConfig& config, const std::string& flag) {
    for (const auto& [name, value] : agreed_flags(config))
      if (name == flag) return value;
    return std::string("(absent)");
  };
  for (const char* flag : {"--layers", "--hidden", "--emsize", "--bptt", "--dropout", "--tied"})
    EXPECT_NE(value_of(c, flag), "(absent)") << flag;
  c.lm.hidden = 650;
  EXPECT_EQ(value_of(c, "--hidden"), "650");
  // Paths may differ per rank: only whether they were given must agree.
  c.resume = "rank0/checkpoint.safetensors";
  EXPECT_EQ(value_of(c, "--resume"), "1");
  EXPECT_EQ(value_of(c, "--threads"), "(absent)");
  EXPECT_EQ(value_of(TrainConfig{}, "--no-augment"), "0");
}

TEST(Flags, LanguageModelDefaultsFillTheFlagsNotGiven) {
  TrainConfig c;
  c.lr = 3.0f;
  const FlagRow& lr = flag_of(&TrainConfig::lr);
  apply_lm_defaults(c, [&](const FlagRow& row) { return &row == &lr; });
  EXPECT_EQ(c.lr, 3.0f);
  EXPECT_EQ(c.momentum, 0.0f);
  EXPECT_EQ(c.weight_decay, 0.0f);
  EXPECT_EQ(c.clip, 0.25f);
  EXPECT_EQ(c.batch_size, 20);
  EXPECT_EQ(c.schedule, "plateau");
  EXPECT_EQ(c.dataset, "fortunes");
  TrainConfig adam;
  adam.optimizer = "adamw";
  apply_optimizer_defaults(adam, [](const FlagRow&) { return false; });
  EXPECT_EQ(adam.weight_decay, 0.01f);
}

TEST(Flags, ResumeChecksTheSavedFlags) {
  const std::string kHint = " (resume ck.end)";
  TrainConfig a, b;
  b.arch = "resnet32";
  const auto saved = flag_metadata(a, SavedBy::image);
  const std::string arch = error_of([&] {
    check_resumed_flags("ck", saved, flag_metadata(b, SavedBy::image), TrainPosition{}, kHint);
  });
  EXPECT_TRUE(
      starts_with(arch, "ck: the checkpoint was trained with --arch resnet20, not resnet32"))
      << arch;
  TrainConfig seed = a;
  seed.seed = 7;
  const auto now = flag_metadata(seed, SavedBy::image);
  EXPECT_TRUE(error_of([&] {
                check_resumed_flags("ck", saved, now, TrainPosition{1, 0, 5}, kHint);
              }).empty());
  const std::string mid = error_of([&] {
    check_resumed_flags("ck", saved, now, TrainPosition{1, 2, 7}, kHint);
  });
  EXPECT_TRUE(starts_with(mid,
                          "ck: a mid-epoch checkpoint with --seed 0 resumes only with the "
                          "same --seed, not 7 (resume ck.end)"))
      << mid;
}

}  // namespace
}  // namespace st::test
